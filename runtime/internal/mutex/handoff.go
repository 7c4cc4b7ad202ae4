package mutex

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/redisnames"
	"github.com/lockgen/lockgen/runtime/internal/errs"
	"github.com/lockgen/lockgen/runtime/internal/hub"
	"github.com/lockgen/lockgen/runtime/internal/lockenv"
	"github.com/lockgen/lockgen/runtime/internal/scripts"
)

// The Mutex's side of every way a release gives the lock to a waiter
// without the waiter's own try (docs/redisson.md, "Hand-offs"): the local
// hand-off, the grants across processes (grant.go) and a fair lock's
// grants (fair_next.lua), which a waiter claims alike (claimGrant).
//
// A local hand-off (handoff.lua) gives the lock to the longest waiter of
// the same Client when no one else listens on the lock's channel. The
// waiter is parked while it sleeps (hub.Offer, Settle, Unpark); the
// releaser runs the script with the waiter's owner, lease and a fresh
// request marker, and settles the offer once its own hold's ctx is done.
// The waiter never tries while an offer to it is in flight (its try would
// count the grant as its own resend). Granted: it holds the lock from the
// script's send. Unknown: it settles the grant as a lost acquire (so a
// late copy never grants). Declined: it tries at once.

// handsOff reports whether m's releases and waits take part in local
// hand-offs: where the scripts can count the lock channel's subscribers
// exactly, on one server or with sharded pub/sub (on a cluster, classic
// PUBSUB NUMSUB counts one node's only).
func (m *Lock) handsOff() bool {
	c := m.env
	return m.kind == Reentrant && !m.opts.Fenced && m.opts.SyncReplicas == 0 && (!c.Cluster || c.Sharded) && !c.NoHandoff && !c.handoffRefused.Load()
}

// releaseHandingOff is the last release of a hold of m (count 1), handing
// the lock to a parked waiter of this Client if one can take it. An offer
// made must be settled (hub.Settle) once the releasing hold's ctx ended.
func (m *Lock) releaseHandingOff(ctx context.Context, a lockArgs, queued bool) (held bool, _ hub.Offer, _ error) {
	c := m.env
	// One ReleaseTimeout for the hand-off and the plain release after a
	// refusal of it: each retries within the bound, not a bound of its own.
	ctx = scripts.WithCallBound(ctx, c.Calls.Limit(ctx))
	channel := LockChannel(m.key)
	o := c.Hub.Offer(channel)
	if !o.Known && !queued {
		// No waiter here, nor lately, and the hold did not come through
		// the queue in Redis: most likely no one waits anywhere.
		res, err := m.release(ctx, c.RDB, a, true, c.Watchdog, 1)
		return res, o, err
	}
	o.Sent = time.Now()
	names := m.grantNames()
	marker := names.queue // unused without a local grantee: any key of the slot
	field, px := o.Field, o.Px
	if o.Made() {
		o.Marker = lockenv.RequestMarker(m.key, c.NewRequestID())
		marker = o.Marker
	} else {
		field, px = "", "0"
	}
	// own: one of the channel's subscribers is this client, which the
	// script checks where it runs (its grant channel, subscribed with the
	// lock's): the hub may not know yet that the server dropped it.
	// records: the releaser's or the grantee's record is in the queue.
	own, across, records := flag(o.Known), flag(c.grants.allow(m.key)), flag(queued || o.Queued)
	n, unanswered, err := c.Calls.RetryRelease(ctx, func(ctx context.Context) (int64, error) {
		return scripts.Handoff.RunOnce(ctx, c.RDB, 6, []any{
			3: a.Key, names.lockCh, marker, names.queue, names.records, names.hubs,
			a.Owner, c.Publish, field, px, names.lockCh, across, own, records, names.channel,
		}).Int64()
	})
	if err == nil && n >= 3 {
		// Other processes wait: this client's newcomers queue in Redis.
		c.Hub.Remote(channel, n == 3)
	}
	switch {
	case err == nil && n == 2:
		o.State = hub.OfferGranted
		return true, o, nil
	case err == nil:
		o.State = hub.OfferPublished
		return true, o, nil
	case errors.Is(err, redis.Nil) && !unanswered:
		o.State = hub.OfferDeclined
		return false, o, nil
	case errors.Is(err, redis.Nil):
		// A copy that got no reply may have granted the lock: the
		// grantee settles the offer, as after a lost reply.
		o.State = hub.OfferUnknown
		return false, o, errFreedUnseen
	case errors.Is(err, errs.Unavailable):
		// Refused (or never sent) until the limit: it did not run. The
		// waiter goes on waiting; the give-back that finishes this
		// release (Release) wakes it with the unlock message.
		o.State = hub.OfferDeclined
		return true, o, err
	case scripts.IsReply(err) && !errors.Is(err, errs.OutcomeUnknown) && !errors.Is(err, errs.Unavailable):
		// The script failed before it wrote anything (see handoff.lua):
		// this server will not run it. Release as usual, from now on too.
		// (Refused until ReleaseTimeout, it may still have run before:
		// the outcome is unknown, below.)
		if refusesHandoff(err) && !c.handoffRefused.Swap(true) {
			c.Log.Warn("hand-offs refused by the server; releases publish the unlock message instead", "err", err)
		}
		o.State = hub.OfferDeclined
		res, err := m.release(ctx, c.RDB, a, true, c.Watchdog, 1)
		return res, o, err
	}
	o.State = hub.OfferUnknown
	return true, o, err
}

// refusesHandoff reports whether an error to the hand-off script says the
// server will never run it: an ACL without PUBSUB (NOPERM, or an ERR worded
// by version), or PUBSUB barred in scripts; not LOADING, READONLY...
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

// takesGrants reports whether m's waiters may be granted the lock by a
// fair release of any process (fair_next.lua): not with replica sync (a
// grant waits for no replica), nor with NoHandoff. Only a waiter with an
// owner of its own takes grants (see Lock.waitSpec).
func (m *Lock) takesGrants() bool {
	return m.kind == Fair && m.opts.SyncReplicas == 0 && !m.env.NoHandoff
}

// grantNames returns m's, made on first use (racing first uses make equal values).
func (m *Lock) grantNames() *grantNames {
	if n := m.names.Load(); n != nil {
		return n
	}
	n := &grantNames{
		queue:   redisnames.Prefix("lockgen_lock_queue", m.key),
		records: redisnames.Prefix("lockgen_lock_grants", m.key),
		hubs:    redisnames.Prefix("lockgen_lock_hubs", m.key),
		lockCh:  LockChannel(m.key),
		// Under Redisson's prefix (for ACLs), unlike any waiter's (docs/redisson.md).
		channel: LockChannel(m.key) + ":" + m.env.ID,
	}
	m.names.Store(n)
	return n
}

// queueTry says whether a try of m registers its waiter for grants, and
// with which lease argument ("0": it takes none, but is in line).
func (m *Lock) queueTry(ctx context.Context, a lockArgs, px time.Duration, waiting bool, count int) (bool, any) {
	c := m.env
	if !waiting || count != 0 || !m.handsOff() || !c.Hub.Subscribed(LockChannel(m.key), true) {
		return false, nil
	}
	if c.Reg.Of(ctx) != nil || c.Reg.Unknown(holdID{Key: m.key, Field: a.FieldID()}) {
		return true, "0"
	}
	return true, c.LeaseArg(px)
}

// untakenGrant is the leave scripts' "may a hold be a grant never taken"
// argument: "1" only for an owner of its own holding nothing of the lock
// here, since then a hold in Redis can only be a grant.
func (m *Lock) untakenGrant(ctx context.Context, a lockArgs) string {
	c := m.env
	if c.Reg.Of(ctx) == nil {
		if n, _ := c.Reg.State(holdID{Key: m.key, Field: a.FieldID()}, 0); n == 0 {
			return "1"
		}
	}
	return "0"
}
