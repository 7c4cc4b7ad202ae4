package mutex

import (
	"context"
	"fmt"
	"time"

	"github.com/lockgen/lockgen/internal/redisnames"
	"github.com/lockgen/lockgen/runtime/internal/hub"
	"github.com/lockgen/lockgen/runtime/internal/scripts"
)

// A kind binds a flavour's scripts to a lock's keys and arguments (one
// plain value per Kind); what else sets the flavours apart is a method of
// Kind.
type kind interface {
	// acquire runs one attempt: 0 taken, > 0 sleep bound in ms, -1 no
	// expiry, or a reply code (replyAborted...).
	acquire(ctx context.Context, m *Lock, a lockArgs, at attempt) (int64, error)
	// release drops one hold: nil reply (redis.Nil) not held, 0 partial, 1 last.
	release(ctx context.Context, m *Lock, a lockArgs, at attempt) (int64, error)
	// leave withdraws a waiter that gave up (when Kind.waits).
	leave(ctx context.Context, m *Lock, a lockArgs) (int64, error)
	// forceUnlock deletes the lock whoever holds it.
	forceUnlock(ctx context.Context, m *Lock) (int64, error)
}

// field is the hash field that proves owner's hold.
func (k Kind) field(owner string) string {
	if k == Write {
		return writeField(owner)
	}
	return owner
}

// channel is the channel a waiter of owner sleeps on: a fair waiter has
// its own; the sides of a read-write lock share one.
func (k Kind) channel(key, owner string) string {
	switch k {
	case Fair:
		return LockChannel(key) + ":" + owner
	case Read, Write:
		return rwChannel(key)
	}
	return LockChannel(key)
}

// extraKeys are the keys renewed with a hold besides the hash: a read hold's timeout keys.
func (k Kind) extraKeys(key, owner string, count int) []string {
	if k != Read {
		return nil
	}
	keys := make([]string, count)
	for i := range keys {
		keys[i] = readTimeoutKey(key, owner, i+1)
	}
	return keys
}

// waits reports whether a waiter of m leaves traces in Redis to withdraw when it gives up.
func (k Kind) waits(m *Lock) bool {
	switch k {
	case Reentrant:
		return m.handsOff()
	case Fair:
		return true
	case Write:
		return m.opts.WritersFirst
	}
	return false
}

// refreshEvery bounds a waiter's sleep so it refreshes its place before
// its record runs out (0: no bound); with writers first a reader behind
// a writer looks again as often as the writer's record could expire.
func (k Kind) refreshEvery(m *Lock) time.Duration {
	switch {
	case k == Reentrant && m.handsOff():
		return grantRecordLife / 2
	case k == Fair:
		return m.opts.QueueTimeout / 3
	case (k == Read || k == Write) && m.opts.WritersFirst:
		return m.env.Watchdog / 3
	}
	return 0
}

// attempt is one acquire or release call.
type attempt struct {
	via     scripts.Runner // where the script runs
	px      any            // lease in ms, as a script argument
	marker  string         // acquire: the request's marker key (see requestMarker)
	count   int            // the owner's hold count before the call
	waiting bool           // acquire: the caller waits if not taken
	fence   *int64         // acquire of a fenced lock: receives the token
	grant   bool           // acquire of a fair lock: a release may grant it
	queued  bool           // acquire: registers the waiter for grants (grant.go)
	grantPx any            // the lease a grant takes with it ("0": none)
}

// reentrant is Redisson's RLock: Client.Mutex.
type reentrant struct{}

// leave takes a waiter that gave up out of the grant queue, and gives
// back a grant it never took (untakenGrant).
func (reentrant) leave(ctx context.Context, m *Lock, a lockArgs) (int64, error) {
	n := m.grantNames()
	return scripts.MutexLeave.Run(ctx, m.env.RDB, 5, []any{
		3: a.Key, n.lockCh, n.queue, n.records, n.hubs,
		a.Owner, m.env.Publish, m.untakenGrant(ctx, a), n.lockCh,
	}).Int64()
}

func (reentrant) acquire(ctx context.Context, m *Lock, a lockArgs, at attempt) (int64, error) {
	if m.opts.Fenced {
		return fencedAcquire(ctx, m, a, at)
	}
	c := m.env
	if at.queued {
		n := m.grantNames()
		return scripts.Acquire.Run(ctx, at.via, 5, []any{
			3: a.Key, at.marker, n.queue, n.records, n.hubs,
			at.px, a.Owner, at.count, c.MarkerTTL, at.grantPx, grantRecordLifeArg, c.IDArg,
		}).Int64()
	}
	return scripts.Acquire.Run(ctx, at.via, 2, []any{
		3: a.Key, at.marker,
		at.px, a.Owner, at.count, c.MarkerTTL,
	}).Int64()
}

func (reentrant) release(ctx context.Context, m *Lock, a lockArgs, at attempt) (int64, error) {
	return scripts.Release.Run(ctx, at.via, 2, []any{
		3: a.Key, LockChannel(m.key),
		at.px, a.Owner, m.env.Publish, at.count,
	}).Int64()
}

func (reentrant) forceUnlock(ctx context.Context, m *Lock) (int64, error) {
	return scripts.ForceUnlock.RunOnce(ctx, m.env.RDB, 2, []any{
		3: m.key, LockChannel(m.key), hub.UnlockMessage, m.env.Publish,
	}).Int64()
}

// LockChannel is the channel a reentrant lock publishes its unlock message
// on. Names follow Redisson's helpers (package redisnames), so that both
// find the same keys and channels, all in the lock's cluster slot.
func LockChannel(key string) string { return redisnames.Prefix("redisson_lock__channel", key) }

// tokenKey names a fenced lock's token counter (Redisson's getTokenName).
func tokenKey(key string) string { return redisnames.Prefix("redisson_lock_token", key) }

// fencedAcquire is reentrant.acquire for a fenced lock, writing the token to *at.fence.
func fencedAcquire(ctx context.Context, m *Lock, a lockArgs, at attempt) (int64, error) {
	res, err := scripts.FencedAcquire.Run(ctx, at.via, 3, []any{
		3: a.Key, at.marker, tokenKey(m.key),
		at.px, a.Owner, at.count, m.env.MarkerTTL,
	}).Int64Slice()
	if err != nil {
		return 0, err
	}
	switch {
	case len(res) == 2 && res[0] == 0:
		if at.fence != nil {
			*at.fence = res[1]
		}
		return 0, nil
	case len(res) == 1 && res[0] != 0:
		return res[0], nil
	}
	return 0, fmt.Errorf("lockgen: fenced_acquire.lua replied %v", res)
}
