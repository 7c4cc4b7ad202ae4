package mutex

import (
	"context"
	"fmt"

	"github.com/lockgen/lockgen/internal/redisnames"
	"github.com/lockgen/lockgen/runtime/internal/hub"
	"github.com/lockgen/lockgen/runtime/internal/scripts"
)

type fair struct{ reentrant }

// fairGrants holds lockgen's waiters that take grants, with the lease a
// release grants them the lock with (see fair_next.lua).
func fairGrants(key string) string { return redisnames.Prefix("lockgen_fair_grants", key) }

func fairQueue(key string) string    { return redisnames.Prefix("redisson_lock_queue", key) }
func fairTimeouts(key string) string { return redisnames.Prefix("redisson_lock_timeout", key) }

// fairWaiters is lockgen's own record of its waiters in the queue, with
// their liveness deadlines (see fair_acquire.lua): it tells them from
// Redisson's, whose acquisitions lower every score behind them.
func fairWaiters(key string) string { return redisnames.Prefix("lockgen_fair_waiters", key) }

func (fair) acquire(ctx context.Context, m *Lock, a lockArgs, at attempt) (int64, error) {
	c := m.env
	grant := "0"
	if at.grant {
		// The lease a release may grant it the lock with, and this try's
		// nonce (its marker), which the grant's message carries back.
		grant = fmt.Sprint(at.px) + ":" + at.marker
	}
	return scripts.FairAcquire.Run(ctx, at.via, 6, []any{
		3: a.Key, fairQueue(m.key), fairTimeouts(m.key), at.marker, fairWaiters(m.key), fairGrants(m.key),
		at.px, a.Owner, m.opts.QueueTimeout.Milliseconds(), at.count, c.MarkerTTL, flag(at.waiting),
		LockChannel(m.key), c.Publish, grant,
	}).Int64()
}

func (fair) release(ctx context.Context, m *Lock, a lockArgs, at attempt) (int64, error) {
	return scripts.FairRelease.Run(ctx, at.via, 5, []any{
		3: a.Key, fairQueue(m.key), fairTimeouts(m.key), fairWaiters(m.key), fairGrants(m.key),
		at.px, a.Owner, m.env.Publish, at.count, LockChannel(m.key),
	}).Int64()
}

// leave also gives back a lock granted to a waiter that gave up as the
// grant was on its way: only for an owner of its own holding nothing of
// the lock here, since then a hold in Redis can only be that grant.
func (fair) leave(ctx context.Context, m *Lock, a lockArgs) (int64, error) {
	c := m.env
	return scripts.FairLeave.Run(ctx, c.RDB, 5, []any{
		3: a.Key, fairQueue(m.key), fairTimeouts(m.key), fairWaiters(m.key), fairGrants(m.key),
		a.Owner, LockChannel(m.key), c.Publish, m.untakenGrant(ctx, a),
	}).Int64()
}

func (fair) forceUnlock(ctx context.Context, m *Lock) (int64, error) {
	return scripts.FairForceUnlock.RunOnce(ctx, m.env.RDB, 2, []any{
		3: m.key, fairQueue(m.key),
		hub.UnlockMessage, m.env.Publish, LockChannel(m.key),
	}).Int64()
}
