package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/lockenv"
	"github.com/lockgen/lockgen/runtime/internal/mutex"
)

// Mutex is a handle on one lock: a reentrant lock (Client.Mutex), a fair
// lock (Client.FairLock), or the read or write side of a read-write lock
// (RWLock.Read, RWLock.Write). It plays the part of Redisson's RLock, with
// its layout: a hash at Key whose field names the owner and whose value is
// the hold count.
//
// Ownership is carried by context.Context: Lock, TryLock and Do hand out a
// ctx that carries the owner token, and an acquisition made with that ctx
// (or one derived from it) re-enters the lock. Goroutines that share such
// a ctx share the hold, so hand it only to work that is part of the
// critical section. Unlock takes the ctx its acquisition returned. A
// handle of another kind on the same key is another lock: it neither
// re-enters nor releases the hold (see Ownership in the package doc).
//
// The ctx of a hold is cancelled with a cause wrapping ErrLockLost as soon
// as the hold is known to be gone, so work guarded by the lock can stop.
//
// A Mutex is a cheap handle: create one per key as needed. It is safe for
// concurrent use.
type Mutex struct {
	c    *Client
	opts LockOptions
	e    mutex.Lock // the engine (package mutex)
}

// newMutex makes the handle of the lock of kind at key.
func newMutex(c *Client, key string, opts LockOptions, kind mutex.Kind, fenced bool) *Mutex {
	m := &Mutex{c: c, opts: opts}
	m.init(c, key, kind, fenced)
	return m
}

// init makes m the handle of the lock of kind at key, with m.opts.
func (m *Mutex) init(c *Client, key string, kind mutex.Kind, fenced bool) {
	m.c = c
	m.e.Init(c.mutexes, key, kind, m.opts.engine(fenced))
}

// engine is what the engine of a lock reads of o (package mutex).
func (o LockOptions) engine(fenced bool) mutex.Options {
	return mutex.Options{Name: o.Name, QueueTimeout: o.QueueTimeout, WritersFirst: o.WritersFirst, SyncReplicas: o.SyncReplicas, Fenced: fenced}
}

// made reports whether a Client made m (see errNotMade).
func (m *Mutex) made() bool { return m != nil && m.c != nil }

// Key is the Redis key of the lock.
func (m *Mutex) Key() string {
	if !m.made() {
		return ""
	}
	return m.e.Key()
}

// Name is the logical name of the lock.
func (m *Mutex) Name() string {
	if !m.made() {
		return ""
	}
	return m.opts.Name
}

func (m *Mutex) fail(op string, err error) error { return fail(op, m.opts.Name, m.e.Key(), err) }

// Lock waits until it holds the lock or ctx is done, with the lease of the
// Mutex's options. It returns the ctx of the hold; pass it to Unlock.
func (m *Mutex) Lock(ctx context.Context) (context.Context, error) {
	if !m.made() {
		return nil, notMade("acquire")
	}
	return m.TryLock(ctx, Forever, m.opts.Lease)
}

// TryLock waits up to wait (0: one try; Forever: until ctx is done) for the
// lock and holds it with lease (Watchdog, or a fixed duration). It returns
// the ctx of the hold, or an error wrapping ErrNotAcquired, the ctx's error,
// ErrClosed, ErrUpgrade, ErrInvalidArgument (ctx's owner holds the key
// through another kind of lock) or a Redis error.
func (m *Mutex) TryLock(ctx context.Context, wait, lease time.Duration) (context.Context, error) {
	if !m.made() {
		return nil, notMade("acquire")
	}
	if err := checkCtx(ctx); err != nil {
		return nil, m.fail("acquire", err)
	}
	if err := m.check(lease); err != nil {
		return nil, m.fail("acquire", err)
	}
	owner, err := m.e.Owner(ctx)
	if err != nil {
		return nil, m.fail("acquire", err)
	}
	if ctx.Err() != nil {
		// The cause tells more than "context canceled": for the ctx of a
		// hold that was lost it wraps ErrLockLost.
		return nil, m.fail("acquire", context.Cause(ctx))
	}
	return m.acquireAs(ctx, owner, wait, lease, time.Time{})
}

// check refuses an acquisition of m with lease that cannot work: a bad
// key or lease, or a fair lock's QueueTimeout too short to refresh its
// waiters' places (every QueueTimeout/3).
func (m *Mutex) check(lease time.Duration) error {
	if err := lockenv.Validate(m.e.Key(), lease); err != nil {
		return err
	}
	if q := m.opts.QueueTimeout; m.e.KindName() == "fair" && q < lockenv.MinLease {
		return fmt.Errorf("%w: QueueTimeout %v is shorter than %v (set at least that, or 0 for 5m)", ErrInvalidArgument, q, lockenv.MinLease)
	}
	return nil
}

// acquireAs is TryLock for a given owner token, as part of a call that
// must return by until (zero: no bound but wait's).
func (m *Mutex) acquireAs(ctx context.Context, owner string, wait, lease time.Duration, until time.Time) (context.Context, error) {
	start := time.Now()
	a, err := m.e.Acquire(ctx, owner, wait, lease, until)
	if err != nil {
		observeTry(m.c.opts.Observer, ctx, m.opts.Name, m.e.Key(), m.e.KindName(), owner, start, err)
		return nil, err
	}
	// Reported before the hold goes on the lease clock, which may report
	// its loss at once: a loss must come after its acquisition.
	observeTry(m.c.opts.Observer, ctx, m.opts.Name, m.e.Key(), m.e.KindName(), owner, start, nil)
	hctx, err := a.Record()
	if err != nil {
		// The Client closed meanwhile and Record gave the lock back.
		observeRelease(m.c.opts.Observer, ctx, m.opts.Name, m.e.Key(), m.e.KindName(), owner, start)
		return nil, err
	}
	return hctx, nil
}

// Unlock releases the acquisition that ctx carries. The acquisition's ctx
// is done before the release is sent, since from then on someone else may
// take the lock. It runs detached from ctx's cancellation (with the
// Client's ReleaseTimeout), so it releases even when ctx is done. It
// returns an error wrapping ErrNotHeld when ctx holds
// no acquisition of this lock (or it was already released, or ctx holds
// the key through another kind of lock), and one
// wrapping ErrLockLost when the hold was lost before the release.
func (m *Mutex) Unlock(ctx context.Context) error {
	if !m.made() {
		return notMade("release")
	}
	if err := checkCtx(ctx); err != nil {
		return m.fail("release", err)
	}
	owner, start, err := m.e.Release(ctx)
	if owner != "" { // the hold ended here (an earlier end was reported then)
		observeEnd(m.c.opts.Observer, ctx, m.opts.Name, m.e.Key(), m.e.KindName(), owner, start, err)
	}
	return err
}

// Do acquires the lock with the Mutex's options (waiting up to WaitTime),
// runs fn with the ctx of the hold, and releases the lock when fn returns or
// panics. The lock is released even when ctx is cancelled meanwhile.
//
// It returns fn's error; if the hold was lost or the release failed, that
// error is joined to it, so errors.Is(err, ErrLockLost) tells that fn ran
// (at least partly) without the lock.
func (m *Mutex) Do(ctx context.Context, fn func(ctx context.Context) error) (err error) {
	if !m.made() {
		return notMade("acquire")
	}
	if fn == nil {
		return m.fail("acquire", fmt.Errorf("%w: nil fn", ErrInvalidArgument))
	}
	return do(ctx, m, m.opts, fn)
}

// locker is what do needs of a lock handle.
type locker interface {
	TryLock(ctx context.Context, wait, lease time.Duration) (context.Context, error)
	Unlock(ctx context.Context) error
}

// do is the body of every Do: acquire with opts' wait time and lease, run
// fn with the hold's ctx, release when fn returns or panics, and join a
// release error (a lost lock) to fn's.
func do(ctx context.Context, l locker, opts LockOptions, fn func(ctx context.Context) error) (err error) {
	hctx, err := l.TryLock(ctx, opts.WaitTime, opts.Lease)
	if err != nil {
		return err
	}
	defer func() {
		if uerr := l.Unlock(hctx); uerr != nil {
			err = errors.Join(err, uerr)
		}
	}()
	return fn(hctx)
}

// IsLocked reports whether anyone holds the lock (for a read-write lock:
// either side).
func (m *Mutex) IsLocked(ctx context.Context) (bool, error) {
	if err := guard(m, ctx, "inspect"); err != nil {
		return false, err
	}
	return m.e.IsLocked(ctx)
}

// HoldCount is the number of holds the owner carried by ctx has on the lock
// (0 when ctx carries no owner or it does not hold the lock).
func (m *Mutex) HoldCount(ctx context.Context) (int, error) {
	if err := guard(m, ctx, "inspect"); err != nil {
		return 0, err
	}
	return m.e.HoldCount(ctx)
}

// NoExpiry is what RemainTTL reports for a lock key without an expiry.
const NoExpiry time.Duration = -1

// RemainTTL is the time until the lock's lease runs out: 0 when the lock is
// free, NoExpiry when the key has no expiry.
func (m *Mutex) RemainTTL(ctx context.Context) (time.Duration, error) {
	if err := guard(m, ctx, "inspect"); err != nil {
		return 0, err
	}
	return m.e.RemainTTL(ctx)
}

// ForceUnlock deletes the lock whoever holds it and wakes the waiters that
// can go next. It reports whether there was a lock. Local holds of the key
// end as lost first (their ctx is done before a waiter can take the lock),
// whatever Redis answers. It is sent once: when its reply is lost the
// error wraps ErrOutcomeUnknown (the lock may be gone).
func (m *Mutex) ForceUnlock(ctx context.Context) (bool, error) {
	if err := guard(m, ctx, "force-unlock"); err != nil {
		return false, err
	}
	return m.e.ForceUnlock(ctx)
}
