package hub

import (
	"slices"
	"strings"
	"time"
)

// Offers: the hub's side of local hand-offs (package mutex's handoff.go
// tells the protocol) and of grants made in Redis, announced on a fair
// waiter's own channel ("2:<nonce>") or on the client's grant channel
// ("2:<owner> <nonce>").

// OfferState is where an offer of a lock to a waiter stands.
type OfferState uint8

const (
	OfferNone      OfferState = iota
	offerPending              // a release is handing the lock to the waiter
	OfferGranted              // the waiter holds the lock
	OfferDeclined             // the release did not hand it on: try
	OfferPublished            // the release published the unlock message: wait for it
	OfferUnknown              // the release got no reply: settle the grant
	OfferRemote               // a release in Redis granted it the lock
)

// HandoffStreak bounds the hand-offs in a row on one channel: then the
// release publishes, for listeners Redis does not count (a Redisson
// client subscribed on a replica).
const HandoffStreak = 16

// An Offer is a release's offer of its lock to a parked waiter, and then
// what the releaser learned of it (for Settle).
type Offer struct {
	w      *Waiter
	Field  string // who the waiter takes the lock as (see Grantee)
	Px     any
	Queued bool // a try queued it in Redis (see Tried)
	Known  bool // this client waits, or waited moments ago, on the channel
	State  OfferState
	Marker string    // the hand-off's request marker
	Sent   time.Time // when its script was sent
}

// Made reports whether the offer went to a waiter: it must be settled.
func (o Offer) Made() bool { return o.w != nil }

// Grantee records the owner token and lease argument w takes a lock
// handed to it with (field "": none), and reports whether it can be.
func (h *Hub) Grantee(w *Waiter, grantee func() (field string, px any)) bool {
	field, px := grantee()
	w.e.sh.mu.Lock()
	w.field, w.px = field, px
	w.e.sh.mu.Unlock()
	return field != ""
}

// Offer picks the waiter on channel a release can hand its lock to: the
// longest waiting one without a wake-up pending, if it is parked and
// grantable. When there is none (!o.Made()) the release publishes.
func (h *Hub) Offer(channel string) (o Offer) {
	sh, e := h.lock(channel)
	defer sh.mu.Unlock()
	o.Known = e != nil
	if h.closed.Load() || e == nil || !e.ready() || e.handOffs >= HandoffStreak {
		return o
	}
	for _, x := range e.waiters {
		if x.shared || x.woken || x.deferred || len(x.c) > 0 {
			continue
		}
		if !x.parked || x.field == "" || x.offer != OfferNone {
			return o
		}
		x.offer = offerPending
		x.woken = true // a hand-off in flight: newcomers let it finish
		e.inflight++
		return Offer{w: x, Field: x.field, Px: x.px, Queued: x.queued, Known: true}
	}
	return o
}

// Settle records the outcome of an offer and wakes its waiter, unless
// the release published the unlock message: then that message wakes it,
// as every other listener (so this client's waiters do not beat other
// processes' to every lock it releases).
func (h *Hub) Settle(o Offer) {
	w := o.w
	e := w.e
	e.sh.mu.Lock()
	defer e.sh.mu.Unlock()
	if o.State == OfferPublished {
		o.State = OfferNone
		if w.parked {
			// w is back asleep, first in line, unless the message
			// woke it already (a pending signal counts as woken).
			w.offer = OfferNone
			if len(w.c) == 0 {
				spentLocked(w)
			}
			return
		}
	}
	w.offer, w.marker, w.sent = o.State, o.Marker, o.Sent
	if o.State == OfferGranted {
		e.handOffs++
		// Changed hands without a message: tracking waits as after one.
		e.lastMsg.Store(time.Now().UnixNano())
	}
	select {
	case w.c <- struct{}{}:
	default: // a wake-up is pending already: Unpark reads the outcome
	}
}

// Park marks a grantable w as sleeping: releases may offer it the lock.
func (h *Hub) Park(w *Waiter) {
	if w.field != "" {
		w.e.sh.mu.Lock()
		w.parked = true
		w.e.sh.mu.Unlock()
	}
}

// Unpark ends w's sleep: no release offers it the lock from now on. An
// offer in flight (one release call) is waited for, and its outcome
// returned (OfferNone: none). For OfferRemote, marker is the grant's nonce.
func (h *Hub) Unpark(w *Waiter) (state OfferState, marker string, sent time.Time) {
	if w.field == "" {
		return OfferNone, "", time.Time{}
	}
	sh := w.e.sh
	sh.mu.Lock()
	defer sh.mu.Unlock()
	w.parked = false
	for w.offer == offerPending {
		sh.mu.Unlock()
		<-w.c // Settle signals once the outcome is in
		sh.mu.Lock()
	}
	state, marker, sent = w.offer, w.marker, w.sent
	w.offer, w.marker = OfferNone, ""
	return state, marker, sent
}

// Remote records that other processes wait on channel's lock: a newcomer
// tries before it sleeps, so it is queued in Redis. With held (granted to
// one of them: a try cannot overtake anyone), the waiters that slept
// without a try (see Undefer) try now.
func (h *Hub) Remote(channel string, held bool) {
	sh, e := h.lock(channel)
	defer sh.mu.Unlock()
	if e != nil {
		remoteLocked(e, held)
	}
}

// remoteLocked: see Remote. e.sh.mu is held.
func remoteLocked(e *entry, held bool) {
	e.remote = true
	if held {
		wakeN(e, len(e.waiters), true)
	}
}

// grantLocked tells w that a release in Redis gave it the lock for the try
// with nonce, and wakes it, unless another offer to it stands (false).
func grantLocked(e *entry, w *Waiter, nonce string) bool {
	if w.offer != OfferNone {
		return false
	}
	w.offer, w.marker = OfferRemote, nonce
	signal(e, w) // if one is pending already, it is this one
	return true
}

// grantFirst gives a grant on a fair waiter's own channel to the longest
// waiter that can take grants; false: none can (one is woken to try: its
// acquire counts the grant as its own).
func grantFirst(e *entry, nonce string) bool {
	for _, w := range e.waiters {
		if w.field != "" && grantLocked(e, w, nonce) {
			return true
		}
	}
	return false
}

// deliverGrant handles "2:<owner> <nonce>" on a grant channel: the waiter
// is woken to claim the lock; if it is gone or busy, its next try takes
// the grant (or its leave gives it back).
func (h *Hub) deliverGrant(channel, payload string) {
	v, _ := h.aliases.Load(channel)
	e, _ := v.(*entry)
	rest, ok := strings.CutPrefix(payload, GrantPrefix)
	owner, nonce, ok2 := strings.Cut(rest, " ")
	if e == nil || !ok || !ok2 || owner == "" { // "": no waiter of ours (a field-less waiter cannot be granted)
		return
	}
	e.sh.mu.Lock()
	defer e.sh.mu.Unlock()
	if e.sh.entries[e.name] != e {
		return
	}
	remoteLocked(e, true)
	if i := slices.IndexFunc(e.waiters, func(w *Waiter) bool { return w.field == owner }); i >= 0 {
		grantLocked(e, e.waiters[i], nonce)
	}
}
