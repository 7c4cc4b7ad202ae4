package mutex

import (
	"context"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/hub"
	"github.com/lockgen/lockgen/runtime/internal/scripts"
)

// A kind is what distinguishes the lock flavours behind a Mutex handle:
// their scripts, the hash field that proves a hold, and how waiters wait.
type kind interface {
	// field is the hash field that proves owner's hold.
	field(owner string) string
	// check refuses, before any round trip, an acquisition by an owner
	// whose existing holds (in the registry) make it wrong (an upgrade).
	check(m *Lock, owner string) error
	// acquire runs one acquire attempt: 0 taken, > 0 sleep bound in ms,
	// -1 no expiry, replyAborted, replyUpgrade.
	acquire(ctx context.Context, m *Lock, a lockArgs, at attempt) (int64, error)
	// settle decides an acquire attempt whose reply was lost: it either
	// took the lock (true) or never will.
	settle(ctx context.Context, m *Lock, a lockArgs, at attempt) (bool, error)
	// release drops one hold: nil reply (redis.Nil) not held, 0 partial, 1 last.
	release(ctx context.Context, m *Lock, a lockArgs, at attempt) (int64, error)
	// channel is the channel a waiter of owner sleeps on.
	channel(key, owner string) string
	// shared reports whether holds of this kind coexist (readers).
	shared() bool
	// queues reports whether a newcomer defers its first try briefly
	// while this client has waiters (an unlock in transit, a hand-off in
	// flight), so it does not jump the in-process queue (see await.Spec.Queue).
	queues() bool
	// waits reports whether a waiter leaves traces to withdraw when it gives up.
	waits(m *Lock) bool
	// leave withdraws a waiter that gave up.
	leave(ctx context.Context, m *Lock, a lockArgs) (int64, error)
	// refreshEvery bounds a waiter's sleep so it can refresh its place (0: no bound).
	refreshEvery(m *Lock) time.Duration
	// forceUnlock deletes the lock whoever holds it.
	forceUnlock(ctx context.Context, m *Lock) (int64, error)
	// extraKeys are the keys renewed with a hold besides the lock hash.
	extraKeys(key, owner string, count int) []string
}

// attempt is one acquire or release call.
type attempt struct {
	via     scripts.Runner // where the script runs
	px      any            // lease in ms, as a script argument
	marker  string         // acquire: the request's marker key (see requestMarker)
	count   int            // the owner's hold count before the call
	waiting bool           // acquire: the caller waits if not taken
	fence   *int64         // acquire of a fenced lock: receives the token
	grant   bool           // acquire of a fair lock: a release may grant it (fair.go)
	// queued: a reentrant waiter's try registers it for grants across
	// processes with lease argument grantPx ("0": it takes none; grant.go).
	queued  bool
	grantPx any
}

// reentrant is Redisson's RLock: Client.Mutex.
type reentrant struct{}

func (reentrant) field(owner string) string    { return owner }
func (reentrant) check(*Lock, string) error    { return nil }
func (reentrant) channel(key, _ string) string { return LockChannel(key) }
func (reentrant) waits(m *Lock) bool           { return m.handsOff() }
func (reentrant) shared() bool                 { return false }
func (reentrant) queues() bool                 { return true }
func (reentrant) leave(ctx context.Context, m *Lock, a lockArgs) (int64, error) {
	return m.grantLeave(ctx, a)
}

// refreshEvery: a waiter queued for grants tries again before its record
// runs out (grant.go).
func (reentrant) refreshEvery(m *Lock) time.Duration {
	if m.handsOff() {
		return grantRecordLife / 2
	}
	return 0
}
func (reentrant) extraKeys(string, string, int) []string { return nil }

// The scripts are sent the hold count the owner has before the call, which
// makes a resend harmless: see acquire.lua and release.lua.

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

func (reentrant) settle(ctx context.Context, m *Lock, a lockArgs, at attempt) (bool, error) {
	c := m.env
	// The settler's attempts go through the watchdog's client (package settle):
	// the caller's may not honour their deadline.
	var via scripts.Runner = c.RDB
	if at.via != nil {
		via = at.via
	}
	n, err := c.Calls.Settle(ctx, func(ctx context.Context) (int64, error) {
		return scripts.Settle.Run(ctx, via, 2, []any{
			3: a.Key, at.marker,
			a.Field, at.count, c.MarkerTTL,
		}).Int64()
	})
	return n == 1, err
}

func (reentrant) release(ctx context.Context, m *Lock, a lockArgs, at attempt) (int64, error) {
	return scripts.Release.Run(ctx, at.via, 2, []any{
		3: a.Key, LockChannel(m.key),
		at.px, a.Owner, m.env.Publish, at.count,
	}).Int64()
}

func (reentrant) forceUnlock(ctx context.Context, m *Lock) (int64, error) {
	return scripts.ForceUnlock.Run(ctx, m.env.RDB, 2, []any{
		3: m.key, LockChannel(m.key), hub.UnlockMessage, m.env.Publish,
	}).Int64()
}
