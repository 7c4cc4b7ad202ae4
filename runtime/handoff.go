package runtime

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime/internal/scripts"
)

// Local hand-off: the last release of a reentrant lock gives the lock, in
// its own script call, to the longest waiter of the same Client, when no
// one else listens on the lock's channel (lua/handoff.lua asks Redis how
// many subscribers it has: one is this Client's hub). The waiter then holds
// the lock one round trip after the release started, instead of two (the
// unlock message, then its own acquire), and without a pub/sub wake-up.
//
// Nobody is overtaken. A waiter of another process (lockgen or Redisson)
// subscribes before it sleeps, and from then on the release publishes as
// usual; within the Client the grantee is the waiter the unlock message
// would have woken. Every handOffStreak hand-offs in a row the release
// publishes anyway, for a waiter Redis cannot count: a Redisson client
// subscribed on a replica (its subscriptionMode SLAVE).
//
// The protocol between the releasing goroutine and the waiter, under the
// waiter's hub shard mutex:
//
//  1. a waiter that may be handed the lock (grantable: a reentrant,
//     unfenced lock on one server without replica sync, waited for by an
//     owner of its own, a top-level Lock: the hand-off acquires for the
//     owner outside the owner's turn, which another goroutine sharing the
//     owner's ctx could take meanwhile) marks itself parked while it
//     sleeps; offer picks only a parked waiter with no
//     wake-up pending, and marks the offer pending (a hand-off in flight);
//  2. the releaser runs the hand-off script with the waiter's owner token,
//     lease and a fresh request marker, then settles the offer: granted,
//     declined (released, or no longer the owner) or unknown (no reply);
//  3. the waiter, woken or not, unparks before it does anything else, and
//     waits for a pending offer's outcome: it never tries while an offer
//     is in flight (its try would count the grant as its own resend).
//     Granted: it holds the lock from the time the script was sent.
//     Unknown: it settles the grant as a lost acquire (settle.lua marks it
//     aborted unless it took the lock, so a late copy never grants).
//     Declined: it tries at once.

// offerState is where an offer of a hand-off to a waiter stands.
type offerState uint8

const (
	offerNone      offerState = iota
	offerPending              // a release is handing the lock to the waiter
	offerGranted              // the waiter holds the lock
	offerDeclined             // the release did not hand it on: try
	offerPublished            // the release published the unlock message: wait for it
	offerUnknown              // the release got no reply: settle the grant
	offerRemote               // a release in Redis granted it the lock (grant.go)
)

// handOffStreak bounds the hand-offs in a row on one channel: then a
// release publishes, for listeners Redis does not count (see above).
const handOffStreak = 16

// offerOutcome is what the releaser learned of an offer.
type offerOutcome struct {
	w      *waiter
	state  offerState
	marker string
	sent   time.Time
}

// handsOff reports whether m's releases and waits take part in local
// hand-offs: a reentrant, unfenced lock, without replica sync, on a
// Client not on Redis Cluster (there PUBSUB NUMSUB counts one node's
// subscribers only) that has not opted out.
func (m *Mutex) handsOff() bool {
	if _, ok := m.k.(reentrant); !ok {
		return false
	}
	c := m.c
	return !m.fenced && m.opts.SyncReplicas == 0 && !c.cluster && !c.opts.NoHandoff && !c.handoffRefused.Load()
}

// offer picks the waiter on channel a release can hand its lock to: the
// longest waiting one without a wake-up pending, if it is parked and
// grantable. It returns nil when there is none (the release publishes).
func (h *hub) offer(channel string) (w *waiter, field string, px any, queued bool) {
	sh := h.shard(channel)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.entries[channel]
	if h.closed.Load() || e == nil || !e.ready() || e.handOffs >= handOffStreak {
		return nil, "", nil, false
	}
	for _, x := range e.waiters {
		if x.shared || x.woken || x.deferred || len(x.C) > 0 {
			continue
		}
		if !x.parked || x.grantField == "" || x.offer != offerNone {
			return nil, "", nil, false
		}
		x.offer = offerPending
		x.woken = true // a hand-off in flight: newcomers let it finish
		e.inflight++
		return x, x.grantField, x.grantPx, x.queued
	}
	return nil, "", nil, false
}

// settleOffer records the outcome of an offer and wakes its waiter, unless
// the release published the unlock message: then the waiter, if still
// asleep, is woken by that message as every other listener is (waking it
// from the release's reply would let this Client's waiters beat other
// processes' to every lock it releases).
func (h *hub) settleOffer(o offerOutcome) {
	w := o.w
	e := w.e
	e.sh.mu.Lock()
	defer e.sh.mu.Unlock()
	if o.state == offerPublished {
		o.state = offerNone
		if w.parked {
			// No hand-off: w is back where it was, asleep and next in
			// line for offers and messages, unless the message woke it
			// already (its signal is pending: it counts as woken).
			w.offer = offerNone
			if len(w.C) == 0 {
				spentLocked(w)
			}
			return
		}
	}
	w.offer, w.offerMarker, w.offerSent = o.state, o.marker, o.sent
	if o.state == offerGranted {
		e.handOffs++
		if h.track && e.key != "" {
			// The lock changed hands without a message: key tracking
			// leaves it alone as it would after one (hub_track.go).
			e.lastMsg.Store(time.Now().UnixNano())
		}
	}
	select {
	case w.C <- struct{}{}:
	default: // a wake-up is pending already: unpark reads the outcome
	}
}

// park marks a grantable w as sleeping: releases may offer it the lock.
func (h *hub) park(w *waiter) {
	if w.grantField == "" {
		return
	}
	sh := w.e.sh
	sh.mu.Lock()
	w.parked = true
	sh.mu.Unlock()
}

// unpark ends w's sleep: no release offers it the lock from now on. An
// offer in flight is waited for (it lasts one release call, bounded by
// the releaser's ReleaseTimeout), and its outcome returned; offerNone
// when there was none.
func (h *hub) unpark(w *waiter) (state offerState, marker string, sent time.Time) {
	if w.grantField == "" {
		return offerNone, "", time.Time{}
	}
	sh := w.e.sh
	sh.mu.Lock()
	w.parked = false
	for w.offer == offerPending {
		sh.mu.Unlock()
		<-w.C // settleOffer signals once the outcome is in
		sh.mu.Lock()
	}
	state, marker, sent = w.offer, w.offerMarker, w.offerSent
	w.offer, w.offerMarker = offerNone, ""
	sh.mu.Unlock()
	return state, marker, sent
}

// releaseHandingOff is the last release of a hold of m (count 1) that
// hands the lock to a parked waiter of this Client if one can take it.
// The returned offer (w nil: none was made) must be settled with
// hub.settleOffer once the releasing hold's ctx is ended.
func (m *Mutex) releaseHandingOff(ctx context.Context, a lockArgs, queued bool) (releaseResult, offerOutcome, error) {
	c := m.c
	channel := lockChannel(m.key)
	w, field, px, granteeQueued := c.hub.offer(channel)
	known := w != nil || c.hub.known(channel)
	if !known && !queued {
		// No waiter here, nor lately, and the hold did not come through
		// the queue in Redis: most likely no one waits anywhere.
		res, err := m.release(ctx, a, true, c.opts.WatchdogTimeout, 1)
		return res, offerOutcome{}, err
	}
	own := "0" // is one of the channel's subscribers this client?
	if known {
		own = "1"
	}
	o := offerOutcome{w: w, sent: time.Now()}
	names := m.grantNames()
	marker := names.queue // unused without a local grantee: any key of the slot
	if w != nil {
		o.marker = requestMarker(m.key, c.newRequestID())
		marker = o.marker
	} else {
		field, px = "", "0"
	}
	across := "0"
	if c.grants.allow(m.key) {
		across = "1"
	}
	records := "0" // the releaser's and the grantee's records in the queue
	if queued || granteeQueued {
		records = "1"
	}
	n, err := c.retry(ctx, func(ctx context.Context) (int64, error) {
		return scripts.Handoff.Run(ctx, c.rdb, 6, []any{
			3: a.key, names.lockCh, marker, names.queue, names.records, names.hubs,
			a.owner, c.publish, field, px, names.lockCh, across, own, records,
		}).Int64()
	})
	if err == nil && n >= 3 {
		// Other processes wait: this client's newcomers queue in Redis.
		c.hub.markRemote(channel, n == 3)
	}
	switch {
	case err == nil && n == 2:
		o.state = offerGranted
		return releaseLast, o, nil
	case err == nil:
		o.state = offerPublished
		return releaseLast, o, nil
	case errors.Is(err, redis.Nil):
		o.state = offerDeclined
		return releaseNotOwner, o, nil
	case scripts.IsReply(err):
		// The script failed before it wrote anything (see handoff.lua):
		// this server will not run it. Release as usual, from now on too.
		if refusesHandoff(err) {
			c.refuseHandoffs(err)
		}
		o.state = offerDeclined
		res, err := m.release(ctx, a, true, c.opts.WatchdogTimeout, 1)
		return res, o, err
	}
	o.state = offerUnknown
	return 0, o, err
}

// claimOffer takes the lock a release handed to this waiter (granted), or
// settles a grant whose outcome is unknown, in the owner's turn. When it
// took the lock the turn is held on return, as after a successful try.
func (m *Mutex) claimOffer(ctx context.Context, a lockArgs, lease time.Duration, state offerState, marker string) (bool, error) {
	c := m.c
	id := holdID{m.key, a.fieldID()}
	// A waiter's owner has no hold of this lock: no other call of it on
	// the lock is in flight, and the turn is free.
	_, px, err := c.enter(context.WithoutCancel(ctx), id, lease)
	if err != nil {
		return false, err
	}
	if state == offerGranted {
		return true, nil
	}
	took, err := m.settleLost(ctx, a, attempt{via: c.rdb, px: c.leaseArg(px), marker: marker}, px)
	if !took {
		c.exit(id)
	}
	return took, err
}

// refuseHandoffs turns hand-offs off for good: the server refused PUBSUB
// in a script (err).
func (c *Client) refuseHandoffs(err error) {
	if !c.handoffRefused.Swap(true) {
		c.log.Warn("hand-offs refused by the server; releases publish the unlock message instead", "err", err)
	}
}

// refusesHandoff reports whether a Redis error to the hand-off script says
// the server will never run it: an ACL without PUBSUB, or PUBSUB barred in
// scripts. Other errors (a server loading, a replica turned read-only)
// pass. A script's ACL refusal is worded by the server's version: NOPERM,
// or an ERR that says the user "can't run this command" (Redis 6.2, 7.0)
// or "has no permissions" (7.2 on).
func refusesHandoff(err error) bool {
	if redis.HasErrorPrefix(err, "NOPERM") {
		return true
	}
	msg := err.Error()
	for _, s := range []string{"not allowed", "can't run this command", "no permissions"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}
