package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/lua"
)

// LockOptions describes one lock: what the generated code declares from
// locks.yaml. The zero value is a watchdog lease and a single try.
type LockOptions struct {
	// Name is the logical name (e.g. "OrderLock"), used in errors, logs and
	// events. Optional.
	Name string
	// Lease is Watchdog (0): renewed while held, or a fixed duration > 0:
	// the key expires after it and is never renewed; the holder's ctx is
	// cancelled with ErrLockLost just before.
	Lease time.Duration
	// WaitTime is how long Do waits for the lock: 0 tries once, Forever
	// (any negative value) waits until the ctx is done.
	WaitTime time.Duration
}

// Mutex is a reentrant, non-fair lock with Redisson RLock's layout: a hash
// at Key whose field is the owner token and whose value is the hold count.
//
// Ownership is carried by context.Context: Lock, TryLock and Do hand out a
// ctx that carries the owner token, and an acquisition made with that ctx
// (or one derived from it) re-enters the lock. Goroutines that share such
// a ctx share the hold, so hand it only to work that is part of the
// critical section. Unlock takes the ctx its acquisition returned.
//
// The ctx of a hold is cancelled with a cause wrapping ErrLockLost as soon
// as the hold is known to be gone, so work guarded by the lock can stop.
//
// A Mutex is a cheap handle: create one per key as needed. It is safe for
// concurrent use.
type Mutex struct {
	c    *Client
	key  string
	opts LockOptions
}

// Mutex returns the reentrant lock at key.
func (c *Client) Mutex(key string, opts LockOptions) *Mutex {
	return &Mutex{c: c, key: key, opts: opts}
}

// Key is the Redis key of the lock.
func (m *Mutex) Key() string { return m.key }

// Name is the logical name of the lock.
func (m *Mutex) Name() string { return m.opts.Name }

func (m *Mutex) fail(op string, err error) error {
	return &LockError{Op: op, Name: m.opts.Name, Key: m.key, Err: err}
}

// Lock waits until it holds the lock or ctx is done, with the lease of the
// Mutex's options. It returns the ctx of the hold; pass it to Unlock.
func (m *Mutex) Lock(ctx context.Context) (context.Context, error) {
	return m.TryLock(ctx, Forever, m.opts.Lease)
}

// TryLock waits up to wait (0: one try; Forever: until ctx is done) for the
// lock and holds it with lease (Watchdog, or a fixed duration). It returns
// the ctx of the hold, or an error wrapping ErrNotAcquired, the ctx's error,
// ErrClosed or a Redis error.
func (m *Mutex) TryLock(ctx context.Context, wait, lease time.Duration) (context.Context, error) {
	if err := m.validate(lease); err != nil {
		return nil, m.fail("acquire", err)
	}
	c := m.c
	start := time.Now()
	owner := ""
	if hc := c.holdOf(ctx); hc != nil {
		owner = hc.acq.h.owner
	} else {
		owner = c.newOwner()
	}
	args := newLockArgs(m.key, owner)
	var sent time.Time
	try := func(ctx context.Context) (bool, time.Duration, error) {
		sent = time.Now()
		return m.tryAcquire(ctx, args, lease)
	}
	if err := c.await(ctx, m.channel, wait, try); err != nil {
		err = m.fail("acquire", err)
		c.observe(Event{Kind: EventAcquireFailed, Name: m.opts.Name, Key: m.key, Wait: time.Since(start), Err: err})
		return nil, err
	}
	hctx, err := c.addHold(ctx, m.opts.Name, args, owner, lease, sent)
	if err != nil {
		// Closed while acquiring: give the lock back rather than leave it.
		_, _ = m.release(ctx, args, true, 0)
		return nil, m.fail("acquire", err)
	}
	c.observe(Event{Kind: EventAcquired, Name: m.opts.Name, Key: m.key, Wait: time.Since(start)})
	return hctx, nil
}

func (m *Mutex) validate(lease time.Duration) error {
	switch {
	case m.key == "":
		return fmt.Errorf("%w: empty key", ErrInvalidKey)
	case lease < 0:
		return fmt.Errorf("%w: negative lease %v (use Watchdog or a positive duration)", ErrInvalidLease, lease)
	case lease > 0 && lease < minLease:
		return fmt.Errorf("%w: lease %v is shorter than %v", ErrInvalidLease, lease, minLease)
	}
	return nil
}

// tryAcquire runs acquire.lua once. A reply lost to a transport error or a
// cancelled ctx is settled: the attempt either took the lock (then it is
// held) or is marked aborted so it never will.
func (m *Mutex) tryAcquire(ctx context.Context, a lockArgs, lease time.Duration) (bool, time.Duration, error) {
	c := m.c
	req := c.newRequestID()
	ttl, err := scriptAcquire.run(ctx, c.rdb, 2, []any{
		3: a.key, a.latch,
		c.leaseArg(c.leaseFor(m.key, a.ownerID(), lease)), a.owner, req, c.latchTTL,
	}).Int64()
	switch {
	case err == nil && ttl == 0:
		return true, 0, nil
	case err == nil:
		return false, time.Duration(ttl) * time.Millisecond, nil
	case isRedisReply(err):
		return false, 0, err
	}
	took, serr := c.settle(ctx, a.latch.(string), req)
	if serr != nil {
		return false, 0, serr
	}
	if took {
		return true, 0, nil
	}
	return false, 0, err
}

// settle decides an acquire whose reply was lost; see settle.lua.
func (c *Client) settle(ctx context.Context, latch, req string) (bool, error) {
	dctx, cancel := c.detached(ctx)
	defer cancel()
	n, err := retryDetached(dctx, func(ctx context.Context) (int64, error) {
		return lua.Settle.Run(ctx, c.rdb, []string{latch}, req, c.latchTTL).Int64()
	})
	return n == 1, err
}

// Unlock releases the acquisition that ctx carries. It runs detached from
// ctx's cancellation (with the Client's ReleaseTimeout), so it releases even
// when ctx is done. It returns an error wrapping ErrNotHeld when ctx holds
// no acquisition of this lock (or it was already released), and one
// wrapping ErrLockLost when the hold was lost before the release.
func (m *Mutex) Unlock(ctx context.Context) error {
	acq := m.c.acquisitionOf(ctx, m.key)
	if acq == nil {
		return m.fail("release", fmt.Errorf("%w: ctx carries no acquisition of this lock", ErrNotHeld))
	}
	last, lease, lost, ok := m.c.dropAcquisition(acq)
	if !ok {
		return m.fail("release", fmt.Errorf("%w: already released", ErrNotHeld))
	}
	defer acq.end(context.Canceled)
	if lost != nil {
		return m.fail("release", lost)
	}
	res, err := m.release(acq.parent, acq.h.args, last, lease)
	if err == nil && res == releaseNotOwner {
		err = fmt.Errorf("%w: the lease ran out or the key was deleted before the release", ErrLockLost)
	}
	if err != nil {
		err = m.fail("release", err)
		m.c.log.Warn("release failed", "lock", m.opts.Name, "key", m.key, "err", err)
		return err
	}
	m.c.observe(Event{Kind: EventReleased, Name: m.opts.Name, Key: m.key, Held: time.Since(acq.start)})
	return nil
}

type releaseResult int8

const (
	releaseNotOwner releaseResult = iota - 1
	releasePartial
	releaseLast
)

var (
	scriptAcquire = newScript(lua.Acquire)
	scriptRelease = newScript(lua.Release)
)

// channel is the lock's unlock channel (computed only on contention).
func (m *Mutex) channel() string { return lockChannel(m.key) }

// release runs release.lua with a fresh request id, resending it on
// transport errors (the unlock latch makes the resend harmless).
func (m *Mutex) release(ctx context.Context, a lockArgs, last bool, lease time.Duration) (releaseResult, error) {
	c := m.c
	if last {
		lease = c.opts.WatchdogTimeout // not applied: the last hold deletes the key
	}
	args := []any{
		3: a.key, lockChannel(m.key), unlockLatch(m.key, c.newRequestID()), a.latch,
		unlockMessage, c.leaseArg(max(lease, minLease)), a.owner, c.publish, c.latchTTL,
	}
	n, err := c.retry(ctx, func(ctx context.Context) (int64, error) {
		return scriptRelease.run(ctx, c.rdb, 4, args).Int64()
	})
	if errors.Is(err, redis.Nil) {
		return releaseNotOwner, nil
	}
	return releaseResult(n), err
}

// Do acquires the lock with the Mutex's options (waiting up to WaitTime),
// runs fn with the ctx of the hold, and releases the lock when fn returns or
// panics. The lock is released even when ctx is cancelled meanwhile.
//
// It returns fn's error; if the hold was lost or the release failed, that
// error is joined to it, so errors.Is(err, ErrLockLost) tells that fn ran
// (at least partly) without the lock.
func (m *Mutex) Do(ctx context.Context, fn func(ctx context.Context) error) (err error) {
	if fn == nil {
		return m.fail("acquire", fmt.Errorf("%w: nil fn", ErrInvalidArgument))
	}
	hctx, err := m.TryLock(ctx, m.opts.WaitTime, m.opts.Lease)
	if err != nil {
		return err
	}
	defer func() {
		if uerr := m.Unlock(hctx); uerr != nil {
			err = errors.Join(err, uerr)
		}
	}()
	return fn(hctx)
}

// IsLocked reports whether anyone holds the lock.
func (m *Mutex) IsLocked(ctx context.Context) (bool, error) {
	n, err := m.c.rdb.Exists(ctx, m.key).Result()
	if err != nil {
		return false, m.fail("inspect", err)
	}
	return n == 1, nil
}

// HoldCount is the number of holds the owner carried by ctx has on the lock
// (0 when ctx carries no owner or it does not hold the lock).
func (m *Mutex) HoldCount(ctx context.Context) (int, error) {
	hc := m.c.holdOf(ctx)
	if hc == nil {
		return 0, nil
	}
	n, err := m.c.rdb.HGet(ctx, m.key, hc.acq.h.owner).Int()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, m.fail("inspect", err)
	}
	return n, nil
}

// NoExpiry is what RemainTTL reports for a lock key without an expiry.
const NoExpiry time.Duration = -1

// RemainTTL is the time until the lock's lease runs out: 0 when the lock is
// free, NoExpiry when the key has no expiry.
func (m *Mutex) RemainTTL(ctx context.Context) (time.Duration, error) {
	d, err := m.c.rdb.PTTL(ctx, m.key).Result()
	if err != nil {
		return 0, m.fail("inspect", err)
	}
	switch {
	case d == -2: // go-redis reports PTTL's -2 (no key) and -1 (no expiry) unscaled
		return 0, nil
	case d < 0:
		return NoExpiry, nil
	}
	return d, nil
}

// ForceUnlock deletes the lock whoever holds it and wakes one waiter. It
// reports whether there was a lock. Local holds of the key end as lost.
func (m *Mutex) ForceUnlock(ctx context.Context) (bool, error) {
	n, err := lua.ForceUnlock.Run(ctx, m.c.rdb, []string{m.key, lockChannel(m.key)}, unlockMessage, m.c.publish).Int64()
	if err != nil {
		return false, m.fail("force-unlock", err)
	}
	m.c.loseKey(m.key, m.fail("force-unlock", fmt.Errorf("%w: force-unlocked", ErrLockLost)))
	return n == 1, nil
}
