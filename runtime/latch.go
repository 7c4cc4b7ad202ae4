package runtime

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/lockenv"
	"github.com/lockgen/lockgen/runtime/internal/semaphore"
)

// LatchOptions describes one count-down latch: what the generated code
// declares from locks.yaml (kind: latch).
type LatchOptions struct {
	// Name is the logical name (e.g. "ImportDone"), used in errors.
	// Optional.
	Name string
	// Count is what Arm sets the latch to.
	Count int
	// WaitTime is how long TryAwait waits when the generated code calls
	// it: 0 checks once, Forever (any negative value) waits until the ctx
	// is done.
	WaitTime time.Duration
}

// Latch is a handle on a count-down latch: waiters block until the count,
// set once, has been counted down to zero. It plays the part of Redisson's
// RCountDownLatch, with its layout: the count at Key (a decimal integer, no
// TTL) and the channel redisson_countdownlatch__channel__{Key}, where "0"
// means the count reached zero (every waiter is woken) and "1" a new count
// or a deletion (no waiter is woken).
//
// A latch is armed explicitly (TrySetCount, Arm) and only when absent; the
// key is deleted when the count reaches zero, and nothing but an explicit
// arm creates it again: a late waiter or CountDown never re-arms it. A latch
// that is not armed counts as released: Await returns at once.
//
// A Latch is a cheap handle, safe for concurrent use.
type Latch struct {
	c    *Client
	opts LatchOptions
	e    semaphore.Latch // the engine (package semaphore)
}

// made reports whether a Client made l (see errNotMade).
func (l *Latch) made() bool { return l != nil && l.c != nil }

// Key is the Redis key of the count.
func (l *Latch) Key() string {
	if !l.made() {
		return ""
	}
	return l.e.Key()
}

// Name is the logical name of the latch.
func (l *Latch) Name() string {
	if !l.made() {
		return ""
	}
	return l.opts.Name
}

func (l *Latch) fail(op string, err error) error { return fail(op, l.opts.Name, l.e.Key(), err) }

// check refuses what the latch cannot do where it is.
func (l *Latch) check(ctx context.Context) error {
	if err := checkCtx(ctx); err != nil {
		return err
	}
	if err := lockenv.Validate(l.e.Key(), Watchdog); err != nil {
		return err
	}
	if l.c.env.Cluster && strings.Contains(l.e.Key(), "{") {
		return fmt.Errorf("%w: a latch's channel wraps its name in braces (Redisson's naming), so on a cluster a name with a hash tag puts the channel in another slot than %q: drop the tag", ErrInvalidKey, l.e.Key())
	}
	return nil
}

// TrySetCount arms the latch with count n if it is not armed (Redisson
// trySetCount). It reports whether it did. It is sent once: when its reply
// is lost the error wraps ErrOutcomeUnknown, and Count tells whether it
// ran.
func (l *Latch) TrySetCount(ctx context.Context, n int) (bool, error) {
	if !l.made() {
		return false, notMade("arm")
	}
	if err := l.check(ctx); err != nil {
		return false, l.fail("arm", err)
	}
	if n < 1 {
		return false, l.fail("arm", fmt.Errorf("%w: count %d (arm with at least 1)", ErrInvalidArgument, n))
	}
	return l.e.TrySet(ctx, n)
}

// Arm is TrySetCount with the latch's Count.
func (l *Latch) Arm(ctx context.Context) (bool, error) {
	if !l.made() {
		return false, notMade("arm")
	}
	return l.TrySetCount(ctx, l.opts.Count)
}

// CountDown counts the latch down by one; the call that reaches zero
// deletes it and releases every waiter. Counting down a latch that is not
// armed does nothing (it is not armed by it either).
//
// A CountDown whose reply was lost is not resent, by go-redis either (it
// is not idempotent): the error wraps ErrOutcomeUnknown, and Count tells
// whether it ran. One that Redis refused before it ran (BUSY, LOADING,
// READONLY, OOM) is sent again, within ctx and the Client's
// ReleaseTimeout; refused until then, the error wraps ErrUnavailable.
func (l *Latch) CountDown(ctx context.Context) error {
	if !l.made() {
		return notMade("count-down")
	}
	if err := l.check(ctx); err != nil {
		return l.fail("count-down", err)
	}
	return l.e.CountDown(ctx)
}

// Count is the latch's count: 0 when it is released or not armed.
func (l *Latch) Count(ctx context.Context) (int64, error) {
	if err := guard(l, ctx, "inspect"); err != nil {
		return 0, err
	}
	return l.e.Count(ctx)
}

// Delete deletes the latch without releasing its waiters (Redisson
// publishes "1", which wakes none). It reports whether it existed. It is
// sent once: when its reply is lost the error wraps ErrOutcomeUnknown.
func (l *Latch) Delete(ctx context.Context) (bool, error) {
	if !l.made() {
		return false, notMade("delete")
	}
	if err := l.check(ctx); err != nil {
		return false, l.fail("delete", err)
	}
	return l.e.Delete(ctx)
}

// Await blocks until the latch is released (its count reached zero, or it
// is not armed) or ctx is done.
func (l *Latch) Await(ctx context.Context) error { return l.TryAwait(ctx, Forever) }

// TryAwait is Await bounded by wait (0: check once; Forever: until ctx is
// done). It returns an error wrapping ErrNotAcquired when the latch was
// not released within wait.
//
// It wakes on the "0" message, and checks the count again once subscribed
// (a release published before the subscription is never missed) and
// whenever the pub/sub connection was replaced (messages published while
// it was down are made up for). A wake-up is a hint: the waiter returns
// when it reads a count of zero (or no latch), as Redisson's await does,
// so a latch armed again (TrySetCount) right after its release, before a
// waiter read it, holds that waiter for the new round too. Arm a new
// round under a new name when every waiter of the last one must go.
func (l *Latch) TryAwait(ctx context.Context, wait time.Duration) error {
	if !l.made() {
		return notMade("await")
	}
	if err := l.check(ctx); err != nil {
		return l.fail("await", err)
	}
	return l.e.Await(ctx, wait)
}
