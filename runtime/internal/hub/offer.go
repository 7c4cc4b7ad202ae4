package hub

import (
	"strings"
	"time"
)

// Offers: the hub's side of the runtime's local hand-offs (package
// mutex's handoff.go tells the protocol) and of grants made in Redis, announced on a
// fair waiter's own channel ("2:<nonce>": to the longest waiter that can
// take one) or on the client's grant channel ("2:<owner> <nonce>").

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

// HandoffStreak bounds the hand-offs in a row on one channel: then Offer
// finds no one, and the release publishes, for listeners Redis does not
// count (a Redisson client subscribed on a replica).
const HandoffStreak = 16

// An Offer is a release's offer of its lock to a parked waiter, and then
// what the releaser learned of it.
type Offer struct {
	w *Waiter
	// Field and Px are who the waiter takes the lock as (see Grantee);
	// Queued, whether a try queued it in Redis (see Tried).
	Field  string
	Px     any
	Queued bool
	// Known: this client waits, or waited moments ago, on the channel.
	Known bool
	// The outcome, for Settle: Marker is the hand-off's request marker,
	// Sent when its script was sent.
	State  OfferState
	Marker string
	Sent   time.Time
}

// Made reports whether the offer went to a waiter: it must be settled.
func (o Offer) Made() bool { return o.w != nil }

// Grantee records who w takes a lock handed to it as: the owner token
// and lease argument grantee returns (field "": it cannot be handed one);
// it reports whether w can be handed one.
func (h *Hub) Grantee(w *Waiter, grantee func() (field string, px any)) bool {
	field, px := grantee()
	sh := w.e.sh
	sh.mu.Lock()
	w.field, w.px = field, px
	sh.mu.Unlock()
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
// the release published the unlock message: then the waiter, if still
// asleep, is woken by that message as every other listener is (waking it
// from the release's reply would let this client's waiters beat other
// processes' to every lock it releases).
func (h *Hub) Settle(o Offer) {
	w := o.w
	e := w.e
	e.sh.mu.Lock()
	defer e.sh.mu.Unlock()
	if o.State == OfferPublished {
		o.State = OfferNone
		if w.parked {
			// No hand-off: w is back where it was, asleep and next in
			// line for offers and messages, unless the message woke it
			// already (its signal is pending: it counts as woken).
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
		if h.links.track && e.key != "" {
			// The lock changed hands without a message: key tracking
			// leaves it alone as it would after one (track.go).
			e.lastMsg.Store(time.Now().UnixNano())
		}
	}
	select {
	case w.c <- struct{}{}:
	default: // a wake-up is pending already: Unpark reads the outcome
	}
}

// Park marks a grantable w as sleeping: releases may offer it the lock.
func (h *Hub) Park(w *Waiter) {
	if w.field == "" {
		return
	}
	sh := w.e.sh
	sh.mu.Lock()
	w.parked = true
	sh.mu.Unlock()
}

// Unpark ends w's sleep: no release offers it the lock from now on. An
// offer in flight is waited for (it lasts one release call, bounded by
// the releaser's timeout), and its outcome returned; OfferNone when there
// was none. For OfferRemote, marker is the grant's nonce.
func (h *Hub) Unpark(w *Waiter) (state OfferState, marker string, sent time.Time) {
	if w.field == "" {
		return OfferNone, "", time.Time{}
	}
	sh := w.e.sh
	sh.mu.Lock()
	w.parked = false
	for w.offer == offerPending {
		sh.mu.Unlock()
		<-w.c // Settle signals once the outcome is in
		sh.mu.Lock()
	}
	state, marker, sent = w.offer, w.marker, w.sent
	w.offer, w.marker = OfferNone, ""
	sh.mu.Unlock()
	return state, marker, sent
}

// Remote records that other processes wait on channel's lock: a newcomer
// tries before it sleeps, so it is queued in Redis. With held (the lock
// was granted to one of them, so a try cannot overtake anyone), waiters
// that slept without a try (behind this client's own, see Undefer) try
// now; otherwise they do on their next wake-up.
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
	if !held {
		return
	}
	for _, w := range e.waiters {
		if w.untried {
			signal(e, w)
		}
	}
}

// grantFirst tells the longest waiter that can take grants that a release
// gave it the lock for the try with nonce (a fair waiter's own channel)
// and wakes it; it reports false when no waiter can take one (then one is
// woken to try: its acquire counts the grant as its own).
func grantFirst(e *entry, nonce string) bool {
	for _, w := range e.waiters {
		if w.field != "" && w.offer == OfferNone {
			w.offer, w.marker = OfferRemote, nonce
			signal(e, w) // if one is pending already, it is this one
			return true
		}
	}
	return false
}

// deliverGrant handles a message on a grant channel: "2:<owner> <nonce>",
// a release gave the lock to owner for its try with nonce. The waiter is
// woken to claim it; if it is gone or busy, its next try takes the grant
// (or its leave gives it back).
func (h *Hub) deliverGrant(channel, payload string) {
	h.aliasMu.RLock()
	e := h.aliases[channel]
	h.aliasMu.RUnlock()
	if e == nil {
		return
	}
	rest, ok := strings.CutPrefix(payload, GrantPrefix)
	owner, nonce, ok2 := strings.Cut(rest, " ")
	if !ok || !ok2 {
		return
	}
	sh := e.sh
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.entries[e.name] != e {
		return
	}
	remoteLocked(e, true)
	for _, w := range e.waiters {
		if w.field == owner {
			if w.offer == OfferNone {
				w.offer, w.marker = OfferRemote, nonce
				signal(e, w)
			}
			return
		}
	}
}
