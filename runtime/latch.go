package runtime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime/internal/await"
	"github.com/lockgen/lockgen/runtime/internal/hub"
	"github.com/lockgen/lockgen/runtime/internal/lockenv"
	"github.com/lockgen/lockgen/runtime/internal/scripts"
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
	c       *Client
	key     string
	channel string
	opts    LatchOptions
}

// latchChannel is Redisson's RCountDownLatch channel: the braces are always
// added, whatever the name holds.
func latchChannel(key string) string { return "redisson_countdownlatch__channel__{" + key + "}" }

// Messages on a latch's channel.
const latchZeroMessage = "0" // the count reached zero: wakes every waiter

// Key is the Redis key of the count.
func (l *Latch) Key() string { return l.key }

// Name is the logical name of the latch.
func (l *Latch) Name() string { return l.opts.Name }

func (l *Latch) fail(op string, err error) error {
	return &LockError{Op: op, Name: l.opts.Name, Key: l.key, Err: err}
}

// check refuses what the latch cannot do where it is.
func (l *Latch) check() error {
	if err := lockenv.Validate(l.key, Watchdog); err != nil {
		return err
	}
	if l.c.env.Cluster && strings.Contains(l.key, "{") {
		return fmt.Errorf("%w: a latch's channel wraps its name in braces (Redisson's naming), so on a cluster a name with a hash tag puts the channel in another slot than %q: drop the tag", ErrInvalidKey, l.key)
	}
	return nil
}

// TrySetCount arms the latch with count n if it is not armed (Redisson
// trySetCount). It reports whether it did.
func (l *Latch) TrySetCount(ctx context.Context, n int) (bool, error) {
	if err := l.check(); err != nil {
		return false, l.fail("arm", err)
	}
	if n < 1 {
		return false, l.fail("arm", fmt.Errorf("%w: count %d (arm with at least 1)", ErrInvalidArgument, n))
	}
	// Not resent by go-redis: a copy after a lost reply would find the
	// latch this call armed and report that it did not.
	set, err := scripts.LatchTrySet.RunOnce(ctx, l.c.env.RDB, 2, []any{
		3: l.key, l.channel,
		n, l.c.env.Publish,
	}).Int64()
	if err != nil {
		return false, l.fail("arm", err)
	}
	return set == 1, nil
}

// Arm is TrySetCount with the latch's Count.
func (l *Latch) Arm(ctx context.Context) (bool, error) { return l.TrySetCount(ctx, l.opts.Count) }

// CountDown counts the latch down by one; the call that reaches zero
// deletes it and releases every waiter. Counting down a latch that is not
// armed does nothing (it is not armed by it either).
//
// A CountDown whose reply was lost is not resent, by go-redis either (it
// is not idempotent): the error wraps ErrOutcomeUnknown, and Count tells
// whether it ran.
func (l *Latch) CountDown(ctx context.Context) error {
	if err := l.check(); err != nil {
		return l.fail("count-down", err)
	}
	err := scripts.LatchCountDown.RunOnce(ctx, l.c.env.RDB, 2, []any{
		3: l.key, l.channel,
		l.c.env.Publish,
	}).Err()
	switch {
	case err == nil:
		return nil
	case scripts.IsReply(err), scripts.NotSent(err):
		return l.fail("count-down", err)
	}
	return l.fail("count-down", fmt.Errorf("%w: %w", ErrOutcomeUnknown, err))
}

// Count is the latch's count: 0 when it is released or not armed.
func (l *Latch) Count(ctx context.Context) (int64, error) {
	n, err := scripts.Do(ctx, l.c.env.RDB, "get", l.key).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, l.fail("inspect", err)
	}
	return max(n, 0), nil
}

// Delete deletes the latch without releasing its waiters (Redisson
// publishes "1", which wakes none). It reports whether it existed.
func (l *Latch) Delete(ctx context.Context) (bool, error) {
	n, err := scripts.LatchDelete.Run(ctx, l.c.env.RDB, 2, []any{
		3: l.key, l.channel,
		l.c.env.Publish,
	}).Int64()
	if err != nil {
		return false, l.fail("delete", err)
	}
	return n == 1, nil
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
// it was down are made up for).
func (l *Latch) TryAwait(ctx context.Context, wait time.Duration) error {
	if err := l.check(); err != nil {
		return l.fail("await", err)
	}
	try := func(ctx context.Context) (bool, time.Duration, error) {
		n, err := scripts.Do(ctx, l.c.env.RDB, "get", l.key).Int64()
		if errors.Is(err, redis.Nil) {
			return true, 0, nil
		}
		if err != nil {
			return false, 0, err
		}
		return n <= 0, -1, nil // -1: no expiry, sleep until the message
	}
	w := await.Spec{
		Channel: l.channel,
		Wait:    wait,
		Wake:    hub.WakeZero,
	}
	if err := l.c.env.Waits.Await(ctx, w, try); err != nil {
		if errors.Is(err, ErrNotAcquired) {
			err = fmt.Errorf("%w: the latch was not released within %v", ErrNotAcquired, wait)
		}
		return l.fail("await", err)
	}
	return nil
}
