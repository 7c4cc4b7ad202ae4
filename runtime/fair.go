package runtime

import (
	"context"
	"fmt"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/hub"
	"github.com/lockgen/lockgen/runtime/internal/scripts"
)

type fair struct{ reentrant }

// fairGrants holds lockgen's waiters that take grants, with the lease a
// release grants them the lock with (see fair_next.lua).
func fairGrants(key string) string { return prefixName("lockgen_fair_grants", key) }

func fairQueue(key string) string    { return prefixName("redisson_lock_queue", key) }
func fairTimeouts(key string) string { return prefixName("redisson_lock_timeout", key) }

// fairWaiters is lockgen's own record of its waiters in the queue, with
// their liveness deadlines (see fair_acquire.lua): it tells them from
// Redisson's, whose acquisitions lower every score behind them.
func fairWaiters(key string) string { return prefixName("lockgen_fair_waiters", key) }

func (fair) channel(key, owner string) string { return lockChannel(key) + ":" + owner }
func (fair) waits(*Mutex) bool                { return true }

// queues: each fair waiter has its own channel, and Redis keeps the order.
func (fair) queues() bool { return false }

func (fair) refreshEvery(m *Mutex) time.Duration { return m.opts.QueueTimeout / 3 }

func (fair) acquire(ctx context.Context, m *Mutex, a lockArgs, at attempt) (int64, error) {
	c := m.c
	join := "0"
	if at.waiting {
		join = "1"
	}
	grant := "0"
	if at.grant {
		// The lease a release may grant it the lock with, and this try's
		// nonce (its marker), which the grant's message carries back.
		grant = fmt.Sprint(at.px) + ":" + at.marker
	}
	return scripts.FairAcquire.Run(ctx, at.via, 6, []any{
		3: a.Key, fairQueue(m.key), fairTimeouts(m.key), at.marker, fairWaiters(m.key), fairGrants(m.key),
		at.px, a.Owner, m.opts.QueueTimeout.Milliseconds(), at.count, c.markerTTL, join,
		lockChannel(m.key), c.publish, grant,
	}).Int64()
}

// takesGrants reports whether m's waiters may be granted the lock by a
// release (fair_next.lua): the head of the queue, if it is such a lockgen
// waiter, holds the lock one message after the release, without an
// acquire of its own, whichever process released it. Not with replica
// sync (a grant waits for no replica), nor with Options.NoHandoff. Only a
// waiter with an owner of its own takes grants (see acquireAs).
func (m *Mutex) takesGrants() bool {
	_, ok := m.k.(fair)
	return ok && m.opts.SyncReplicas == 0 && !m.c.opts.NoHandoff
}

// claimGrant takes the lock a release granted this waiter, in the owner's
// turn (held on return when it took it). The grant's lease is the
// waiter's own, cut to cut (a fair waiter's queue record, fair_next.lua;
// a reentrant waiter's record, grant_next.lua), and the hold counts it
// from the waiter's last try, sent before the grant. It claims only a
// grant made for that try (ours: the message carried the try's nonce; a
// message delayed past a later try may be of a grant whose lease ran out
// since). A watchdog hold whose lease was cut is claimed with the cut as
// all that is confirmed (it returns it): the hold's deadline counts it, and
// the watchdog renews it at its next tick. It does not claim a fixed lease
// longer than the cut, nor when the last try is so old that little of the
// lease would be left (for a cut watchdog hold, less than half of it after
// a tick): the waiter's next try finds a live grant, and count.lua
// counts it as the waiter's own acquisition with the lease applied anew
// from that try.
func (m *Mutex) claimGrant(a lockArgs, lease time.Duration, lastTry time.Time, ours bool, cut time.Duration) (took bool, confirmed time.Duration) {
	if !ours {
		return false, 0
	}
	c := m.c
	id := holdID{Key: m.key, Field: a.FieldID()}
	_, px, _ := c.reg.Enter(context.Background(), id, lease) // an owner of its own: the turn is free
	if cut < px {
		if lease != Watchdog {
			c.reg.Exit(id)
			return false, 0
		}
		confirmed = cut
	}
	budget := min(px, cut) / 2
	if confirmed > 0 {
		// Only the cut is confirmed: the first renewal goes out at the
		// watchdog's next tick and must be confirmed before the cut runs
		// out. Without room for that, the next try (at once) takes the
		// grant with the whole lease (count.lua).
		budget -= c.wd.timing.Tick
	}
	if time.Since(lastTry) > budget {
		c.reg.Exit(id)
		return false, 0
	}
	return true, confirmed
}

// settle decides a try whose reply was lost, as a reentrant lock's
// (settle.lua), then confirms a new acquisition found taken with a copy of
// the try (Mutex.reapply): the release may have granted the waiter the
// lock (fair_next.lua) before the try was sent.
func (f fair) settle(ctx context.Context, m *Mutex, a lockArgs, at attempt) (bool, error) {
	took, err := f.reentrant.settle(ctx, m, a, at)
	if err != nil || !took || at.count != 0 || !m.takesGrants() {
		return took, err
	}
	return m.reapply(ctx, a, at, f.acquire)
}

func (fair) release(ctx context.Context, m *Mutex, a lockArgs, at attempt) (int64, error) {
	return scripts.FairRelease.Run(ctx, at.via, 5, []any{
		3: a.Key, fairQueue(m.key), fairTimeouts(m.key), fairWaiters(m.key), fairGrants(m.key),
		at.px, a.Owner, m.c.publish, at.count, lockChannel(m.key),
	}).Int64()
}

// leave also gives back a lock granted to a waiter that gave up as the
// grant was on its way: only for an owner of its own holding nothing of
// the lock here, since then a hold in Redis can only be that grant.
func (fair) leave(ctx context.Context, m *Mutex, a lockArgs) (int64, error) {
	c := m.c
	return scripts.FairLeave.Run(ctx, c.rdb, 5, []any{
		3: a.Key, fairQueue(m.key), fairTimeouts(m.key), fairWaiters(m.key), fairGrants(m.key),
		a.Owner, lockChannel(m.key), c.publish, m.untakenGrant(ctx, a),
	}).Int64()
}

func (fair) forceUnlock(ctx context.Context, m *Mutex) (int64, error) {
	return scripts.FairForceUnlock.Run(ctx, m.c.rdb, 2, []any{
		3: m.key, fairQueue(m.key),
		hub.UnlockMessage, m.c.publish, lockChannel(m.key),
	}).Int64()
}
