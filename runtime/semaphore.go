package runtime

import (
	"context"
	"fmt"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/lockenv"
	"github.com/lockgen/lockgen/runtime/internal/semaphore"
)

// SemaphoreOptions describes one semaphore: what the generated code
// declares from locks.yaml (kind: semaphore).
type SemaphoreOptions struct {
	// Name is the logical name (e.g. "SeatPool"), used in errors, logs and
	// events. Optional.
	Name string
	// Permits is the number of permits a fresh semaphore starts with: an
	// acquire that finds the free count absent sets it to Permits minus the
	// permits held (Redisson's trySetPermits, "set if absent", made part
	// of the acquire so nothing has to arm the semaphore first). Zero
	// leaves an absent count absent: nothing can be acquired until
	// TrySetPermits, SetPermits or AddPermits sets it. A negative value,
	// or one above 2^53 (the integers Redis's Lua scripts compute with
	// exactly: their numbers are doubles), is refused by every acquisition
	// (ErrInvalidArgument).
	Permits int
	// Lease is how long each held permit lasts: Watchdog (0) renews it
	// while held, a fixed duration > 0 lets it run out. Either way a
	// holder that crashes gives its permit back when the lease ends.
	Lease time.Duration
	// WaitTime is how long Do waits for a permit: 0 tries once, Forever
	// (any negative value) waits until the ctx is done.
	WaitTime time.Duration
}

// Semaphore is a handle on a permit-expirable semaphore: at most a number
// of holders at once, each permit with its own lease. It plays the part of
// Redisson's RPermitExpirableSemaphore, with its layout: the free count at
// Key (a decimal integer), the held permits in the sorted set
// {Key}:timeout (member: a 16-byte random permit id, score: the permit's
// expiry in epoch ms), and the channel redisson_sc:{Key}, whose payload
// is the free count after a release, which wakes that many waiters.
//
// Every script first reclaims the permits whose expiry has passed, so a
// holder that crashed or was cut off gives its permits back after its
// lease, whoever calls next. A waiter sleeps until a release's message or
// the nearest expiry among the held permits, whichever comes first.
//
// Acquire, TryAcquire and Do hand out the ctx of the hold, as a lock's do:
// it is cancelled with a cause wrapping ErrLockLost when the permits are
// known to be gone (their keys deleted, a renewal that found them missing,
// or a lease that ran out unconfirmed). Release takes that ctx. Permits are
// not reentrant: an acquisition with the ctx of another takes new permits.
//
// Expiry scores are stamped with the Redis server's clock (TIME), so the
// hosts' clocks do not matter to lockgen clients; a Java client on the
// same semaphore stamps and reclaims with its own host's clock.
//
// A Semaphore is a cheap handle, safe for concurrent use.
type Semaphore struct {
	c    *Client
	opts SemaphoreOptions
	e    semaphore.Sem // the engine (package semaphore)
}

// made reports whether a Client made s (see errNotMade).
func (s *Semaphore) made() bool { return s != nil && s.c != nil }

// Key is the Redis key of the free count.
func (s *Semaphore) Key() string {
	if !s.made() {
		return ""
	}
	return s.e.Key()
}

// Name is the logical name of the semaphore.
func (s *Semaphore) Name() string {
	if !s.made() {
		return ""
	}
	return s.opts.Name
}

// PermitOwnerLen is how many bytes of a lockgen permit id are the start of
// its Client's uuid (the rest are random).
const PermitOwnerLen = lockenv.PermitOwnerLen

func (s *Semaphore) fail(op string, err error) error { return fail(op, s.opts.Name, s.e.Key(), err) }

// MaxPermits is the most permits one acquisition of a Semaphore takes:
// each permit has an id of its own, made before the call (16 bytes) and
// kept in Redis (a member of the semaphore's sorted set).
const MaxPermits = 1 << 16

// maxCount is the largest SemaphoreOptions.Permits: the scripts compute
// the free count with Lua numbers, doubles, exact up to 2^53.
const maxCount = 1 << 53

// Acquire waits until it holds n permits or ctx is done, with the
// Semaphore's lease. It returns the ctx of the hold; pass it to Release.
func (s *Semaphore) Acquire(ctx context.Context, n int) (context.Context, error) {
	return s.TryAcquire(ctx, n, Forever)
}

// TryAcquire waits up to wait (0: one try; Forever: until ctx is done)
// for n permits and holds them with the Semaphore's lease. It returns the
// ctx of the hold, or an error wrapping ErrNotAcquired, the ctx's error,
// ErrClosed or a Redis error.
func (s *Semaphore) TryAcquire(ctx context.Context, n int, wait time.Duration) (context.Context, error) {
	if !s.made() {
		return nil, notMade("acquire")
	}
	lease := s.opts.Lease
	switch {
	case ctx == nil:
		return nil, s.fail("acquire", checkCtx(ctx))
	case n < 1:
		return nil, s.fail("acquire", fmt.Errorf("%w: %d permits (acquire at least 1)", ErrInvalidArgument, n))
	case n > MaxPermits:
		return nil, s.fail("acquire", fmt.Errorf("%w: %d permits (at most MaxPermits, %d, at once)", ErrInvalidArgument, n, MaxPermits))
	case s.opts.Permits < 0 || int64(s.opts.Permits) > maxCount:
		return nil, s.fail("acquire", fmt.Errorf("%w: SemaphoreOptions.Permits %d is out of range (set 0 to 2^53, the counts Redis's Lua scripts compute exactly)", ErrInvalidArgument, s.opts.Permits))
	}
	if err := lockenv.Validate(s.e.Key(), lease); err != nil {
		return nil, s.fail("acquire", err)
	}
	if ctx.Err() != nil {
		return nil, s.fail("acquire", context.Cause(ctx))
	}
	start := time.Now()
	w, err := s.e.Acquire(ctx, n, wait, lease)
	if err != nil {
		observeTry(s.c.opts.Observer, ctx, s.opts.Name, s.e.Key(), "semaphore", "", start, err)
		return nil, err
	}
	// Before the hold goes on the lease clock, as Mutex's (acquireAs).
	observeTry(s.c.opts.Observer, ctx, s.opts.Name, s.e.Key(), "semaphore", w.Owner(), start, nil)
	hctx, err := w.Record()
	if err != nil {
		observeRelease(s.c.opts.Observer, ctx, s.opts.Name, s.e.Key(), "semaphore", w.Owner(), start)
		return nil, err
	}
	return hctx, nil
}

// Release gives back the permits of the acquisition that ctx carries. It
// runs detached from ctx's cancellation (with the Client's ReleaseTimeout),
// so it releases even when ctx is done. It returns an error wrapping
// ErrNotHeld when ctx carries no acquisition of this semaphore (or it was
// released already), and one wrapping ErrLockLost when the permits were
// lost (ran out, or deleted) before the release.
func (s *Semaphore) Release(ctx context.Context) error {
	if !s.made() {
		return notMade("release")
	}
	if err := checkCtx(ctx); err != nil {
		return s.fail("release", err)
	}
	owner, start, err := s.e.Release(ctx)
	if owner != "" { // the hold ended here (an earlier end was reported then)
		observeEnd(s.c.opts.Observer, ctx, s.opts.Name, s.e.Key(), "semaphore", owner, start, err)
	}
	return err
}

// Do acquires one permit with the Semaphore's options (waiting up to
// WaitTime), runs fn with the ctx of the hold, and releases the permit
// when fn returns or panics, even when ctx is cancelled meanwhile. It
// returns fn's error, joined with the release's (errors.Is(err,
// ErrLockLost) tells that fn ran, at least partly, without its permit).
func (s *Semaphore) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	if !s.made() {
		return notMade("acquire")
	}
	if fn == nil {
		return s.fail("acquire", fmt.Errorf("%w: nil fn", ErrInvalidArgument))
	}
	return do(ctx, permitLocker{s}, LockOptions{WaitTime: s.opts.WaitTime, Lease: s.opts.Lease}, fn)
}

// permitLocker is a Semaphore taking one permit, as do wants a lock.
type permitLocker struct{ s *Semaphore }

func (p permitLocker) TryLock(ctx context.Context, wait, _ time.Duration) (context.Context, error) {
	return p.s.TryAcquire(ctx, 1, wait)
}
func (p permitLocker) Unlock(ctx context.Context) error { return p.s.Release(ctx) }

// Available is the number of free permits, after the expired ones were
// reclaimed (0 when the semaphore was never set).
func (s *Semaphore) Available(ctx context.Context) (int, error) {
	if err := guard(s, ctx, "inspect"); err != nil {
		return 0, err
	}
	return s.e.Available(ctx)
}

// Drain takes every free permit at once and returns how many there were.
// The drained permits belong to no one: AddPermits gives them back. It is
// sent once: when its reply is lost the error wraps ErrOutcomeUnknown.
func (s *Semaphore) Drain(ctx context.Context) (int, error) {
	if err := guard(s, ctx, "drain"); err != nil {
		return 0, err
	}
	return s.e.Drain(ctx)
}

// TrySetPermits sets the number of free permits to n only when the
// semaphore has none set (Redisson trySetPermits). It reports whether it
// did. It is sent once: when its reply is lost the error wraps
// ErrOutcomeUnknown (Available tells whether it ran).
func (s *Semaphore) TrySetPermits(ctx context.Context, n int) (bool, error) {
	if err := s.guardCount(ctx, n); err != nil {
		return false, err
	}
	return s.e.TrySetPermits(ctx, n)
}

// guardCount is guard for the calls that set or change the count by n,
// which refuses n past 2^53 either way (maxCount): the scripts compute the
// free count with Lua's doubles, and SetPermits(1e17) stored "1e+17",
// which every acquire then refused.
func (s *Semaphore) guardCount(ctx context.Context, n int) error {
	if err := guard(s, ctx, "set-permits"); err != nil {
		return err
	}
	if int64(n) > maxCount || int64(n) < -maxCount {
		return s.fail("set-permits", fmt.Errorf("%w: %d permits is out of range (at most 2^53 either way, the counts Redis's Lua scripts compute exactly)", ErrInvalidArgument, n))
	}
	return nil
}

// SetPermits makes n the semaphore's total: the free count becomes n minus
// the permits held now (Redisson setPermits). Waiters are woken for the
// permits that came free. Here, in TrySetPermits and in AddPermits, n
// past 2^53 either way is refused (ErrInvalidArgument), as Permits is.
func (s *Semaphore) SetPermits(ctx context.Context, n int) error {
	if err := s.guardCount(ctx, n); err != nil {
		return err
	}
	return s.e.SetPermits(ctx, n)
}

// AddPermits adds n (which may be negative) to the free permits. Waiters
// are woken for the permits that came free. It is never sent twice: when
// its reply is lost it returns an error wrapping ErrOutcomeUnknown (the
// permits may or may not have been added).
func (s *Semaphore) AddPermits(ctx context.Context, n int) error {
	if err := s.guardCount(ctx, n); err != nil {
		return err
	}
	return s.e.AddPermits(ctx, n)
}
