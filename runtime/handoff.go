package runtime

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime/internal/hub"
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
// would have woken. Every hub.HandoffStreak hand-offs in a row the release
// publishes anyway, for a waiter Redis cannot count: a Redisson client
// subscribed on a replica (its subscriptionMode SLAVE).
//
// The protocol (the hub's side: hub.Offer, hub.Settle, hub.Unpark): a
// waiter that may be handed the lock (grantable: a reentrant, unfenced lock
// without replica sync, on one server or a cluster with sharded pub/sub,
// waited for by an owner of its own, a top-level Lock: the hand-off
// acquires for the owner outside the owner's turn, which another goroutine
// sharing the owner's ctx could take meanwhile) is parked while it
// sleeps; the releaser takes the offer, runs the hand-off script with the
// waiter's owner token, lease and a fresh request marker, and settles the
// offer once its own hold's ctx is done.
// The waiter, woken or not, unparks first and waits for a pending offer's
// outcome: it never tries while one is in flight (its try would count the
// grant as its own resend). Granted: it holds the lock from the time the
// script was sent. Unknown (no reply): it settles the grant as a lost
// acquire (settle.lua marks it aborted unless it took the lock, so a late
// copy never grants). Declined (released, or no longer the owner): it
// tries at once.

// handsOff reports whether m's releases and waits take part in local
// hand-offs: a reentrant, unfenced lock, without replica sync, on a
// Client that has not opted out and whose scripts can count the lock
// channel's subscribers exactly: on one server, or on Redis Cluster with
// sharded pub/sub (SHARDNUMSUB on the slot's master counts every
// subscriber of the shard channel; the scripts count with it when they
// SPUBLISH). Not on a cluster with classic pub/sub: PUBSUB NUMSUB counts
// one node's subscribers only, so a release would not see the other
// Clients' waiters.
func (m *Mutex) handsOff() bool {
	if _, ok := m.k.(reentrant); !ok {
		return false
	}
	c := m.c
	return !m.fenced && m.opts.SyncReplicas == 0 && (!c.cluster || c.sharded) && !c.opts.NoHandoff && !c.handoffRefused.Load()
}

// releaseHandingOff is the last release of a hold of m (count 1) that
// hands the lock to a parked waiter of this Client if one can take it.
// The returned offer, if made, must be settled with hub.Settle once the
// releasing hold's ctx is ended.
func (m *Mutex) releaseHandingOff(ctx context.Context, a lockArgs, queued bool) (releaseResult, hub.Offer, error) {
	c := m.c
	channel := lockChannel(m.key)
	o := c.hub.Offer(channel)
	known := o.Known
	if !known && !queued {
		// No waiter here, nor lately, and the hold did not come through
		// the queue in Redis: most likely no one waits anywhere.
		res, err := m.release(ctx, a, true, c.opts.WatchdogTimeout, 1)
		return res, o, err
	}
	// Is one of the channel's subscribers this client? The script checks
	// where it runs (its grant channel, subscribed with the lock's): the
	// hub may not know yet that the server dropped its subscription.
	own := "0"
	if known {
		own = "1"
	}
	o.Sent = time.Now()
	names := m.grantNames()
	marker := names.queue // unused without a local grantee: any key of the slot
	field, px := o.Field, o.Px
	if o.Made() {
		o.Marker = requestMarker(m.key, c.newRequestID())
		marker = o.Marker
	} else {
		field, px = "", "0"
	}
	across := "0"
	if c.grants.allow(m.key) {
		across = "1"
	}
	records := "0" // the releaser's and the grantee's records in the queue
	if queued || o.Queued {
		records = "1"
	}
	n, err := c.calls.retry(ctx, func(ctx context.Context) (int64, error) {
		return scripts.Handoff.Run(ctx, c.rdb, 6, []any{
			3: a.Key, names.lockCh, marker, names.queue, names.records, names.hubs,
			a.Owner, c.publish, field, px, names.lockCh, across, own, records, names.channel,
		}).Int64()
	})
	if err == nil && n >= 3 {
		// Other processes wait: this client's newcomers queue in Redis.
		c.hub.Remote(channel, n == 3)
	}
	switch {
	case err == nil && n == 2:
		o.State = hub.OfferGranted
		return releaseLast, o, nil
	case err == nil:
		o.State = hub.OfferPublished
		return releaseLast, o, nil
	case errors.Is(err, redis.Nil):
		o.State = hub.OfferDeclined
		return releaseNotOwner, o, nil
	case scripts.IsReply(err):
		// The script failed before it wrote anything (see handoff.lua):
		// this server will not run it. Release as usual, from now on too.
		if refusesHandoff(err) {
			c.refuseHandoffs(err)
		}
		o.State = hub.OfferDeclined
		res, err := m.release(ctx, a, true, c.opts.WatchdogTimeout, 1)
		return res, o, err
	}
	o.State = hub.OfferUnknown
	return 0, o, err
}

// claimOffer takes the lock a release handed to this waiter (granted), or
// settles a grant whose outcome is unknown, in the owner's turn. When it
// took the lock the turn is held on return, as after a successful try.
func (m *Mutex) claimOffer(ctx context.Context, a lockArgs, lease time.Duration, state hub.OfferState, marker string) (bool, error) {
	c := m.c
	id := holdID{Key: m.key, Field: a.FieldID()}
	// A waiter's owner has no hold of this lock: no other call of it on
	// the lock is in flight, and the turn is free.
	_, px, err := c.reg.Enter(context.WithoutCancel(ctx), id, lease)
	if err != nil {
		return false, err
	}
	if state == hub.OfferGranted {
		return true, nil
	}
	took, err := m.settleLost(ctx, a, attempt{via: c.rdb, px: c.leaseArg(px), marker: marker}, px)
	if !took {
		c.reg.Exit(id)
	}
	return took, err
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
