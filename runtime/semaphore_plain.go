package runtime

import (
	"context"
	"fmt"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/lockenv"
	"github.com/lockgen/lockgen/runtime/internal/semaphore"
)

// PlainSemaphore is a handle on a semaphore in the layout of Redisson's
// RSemaphore, for Go services that share one with Java services that use
// it: the free count at Key (a decimal integer) and the channel
// redisson_sc:{Key}, whose payload is the free count after a release.
//
// It is not crash-safe: permits have no ids and no leases, so a holder
// that crashes, or whose Release is lost, never gives its permits back
// (AddPermits can, by hand). Neither is an acquire or release whose reply
// was lost resent: each returns an error wrapping ErrOutcomeUnknown. A
// release that Redis refused before it ran is sent again.
// Prefer Semaphore (RPermitExpirableSemaphore's layout) for anything new;
// the DSL offers only that one.
//
// A PlainSemaphore is a cheap handle, safe for concurrent use.
type PlainSemaphore struct {
	c *Client         // the Client that made it (nil: none, see made)
	e semaphore.Plain // the engine (package semaphore)
}

// made reports whether a Client made p (see errNotMade).
func (p *PlainSemaphore) made() bool { return p != nil && p.c != nil }

// Key is the Redis key of the free count.
func (p *PlainSemaphore) Key() string {
	if !p.made() {
		return ""
	}
	return p.e.Key()
}

func (p *PlainSemaphore) fail(op string, err error) error {
	return fail(op, p.e.Name(), p.e.Key(), err)
}

// TrySetPermits sets the free count to n only when it is absent. Like
// AddPermits and Release, it is sent once: when its reply is lost the
// error wraps ErrOutcomeUnknown.
func (p *PlainSemaphore) TrySetPermits(ctx context.Context, n int) (bool, error) {
	if err := guard(p, ctx, "set-permits"); err != nil {
		return false, err
	}
	return p.e.TrySetPermits(ctx, n)
}

// Acquire waits until it took n permits or ctx is done.
func (p *PlainSemaphore) Acquire(ctx context.Context, n int) error {
	if !p.made() {
		return notMade("acquire")
	}
	return p.TryAcquire(ctx, n, Forever)
}

// TryAcquire waits up to wait (0: one try; Forever: until ctx is done) to
// take n permits. It returns an error wrapping ErrNotAcquired when it
// could not, ErrOutcomeUnknown when a reply was lost (the permits may be
// taken; it tries no more then, nor does go-redis resend the try), the
// ctx's error or a Redis error. On a client that does not honour deadlines
// on reads, a try abandoned at its deadline whose reply comes after all
// gives back the permits it took (package semaphore).
func (p *PlainSemaphore) TryAcquire(ctx context.Context, n int, wait time.Duration) error {
	if !p.made() {
		return notMade("acquire")
	}
	if err := checkCtx(ctx); err != nil {
		return p.fail("acquire", err)
	}
	if n < 1 {
		return p.fail("acquire", fmt.Errorf("%w: %d permits (acquire at least 1)", ErrInvalidArgument, n))
	}
	if err := lockenv.Validate(p.e.Key(), Watchdog); err != nil {
		return p.fail("acquire", err)
	}
	return p.e.Acquire(ctx, n, wait)
}

// Release gives back n permits and wakes that many waiters. It runs
// detached from ctx's cancellation, with the Client's ReleaseTimeout,
// within which it is sent again while Redis refuses it before it runs
// (BUSY, LOADING, READONLY, OOM); refused until then, the error wraps
// ErrUnavailable (it did not run: the permits are still held).
func (p *PlainSemaphore) Release(ctx context.Context, n int) error {
	if err := guard(p, ctx, "release"); err != nil {
		return err
	}
	if n < 1 {
		return p.fail("release", fmt.Errorf("%w: %d permits (release at least 1)", ErrInvalidArgument, n))
	}
	return p.e.Release(ctx, n)
}

// AddPermits adds n (which may be negative) to the free count, and wakes
// waiters for the permits that came free. It never runs twice: when its
// reply is lost the error wraps ErrOutcomeUnknown (the permits may or may
// not have been added). Like Release, it is sent again while Redis refuses
// it before it runs, within ctx and the Client's ReleaseTimeout.
func (p *PlainSemaphore) AddPermits(ctx context.Context, n int) error {
	if err := guard(p, ctx, "set-permits"); err != nil {
		return err
	}
	return p.e.AddPermits(ctx, n)
}

// Available is the free count (0 when absent).
func (p *PlainSemaphore) Available(ctx context.Context) (int, error) {
	if err := guard(p, ctx, "inspect"); err != nil {
		return 0, err
	}
	return p.e.Available(ctx)
}
