package mutex

import (
	"context"
	"fmt"

	"github.com/lockgen/lockgen/internal/redisnames"
	"github.com/lockgen/lockgen/runtime/internal/hub"
	"github.com/lockgen/lockgen/runtime/internal/scripts"
)

type fair struct{ reentrant }

// fairGrants holds lockgen's waiters that take grants, with their lease.
func fairGrants(key string) string { return redisnames.Prefix("lockgen_fair_grants", key) }

func fairQueue(key string) string    { return redisnames.Prefix("redisson_lock_queue", key) }
func fairTimeouts(key string) string { return redisnames.Prefix("redisson_lock_timeout", key) }

// fairWaiters records lockgen's waiters in the queue with their liveness
// deadlines: it tells them from Redisson's (fair_acquire.lua).
func fairWaiters(key string) string { return redisnames.Prefix("lockgen_fair_waiters", key) }

func (fair) acquire(ctx context.Context, m *Lock, a lockArgs, at attempt) (int64, error) {
	c := m.env
	grant := "0"
	if at.grant {
		// The lease to grant, and the try's nonce for the message.
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

// leave also gives back a grant that came as the waiter gave up (untakenGrant).
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
