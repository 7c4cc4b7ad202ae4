package semaphore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/await"
	"github.com/lockgen/lockgen/runtime/internal/errs"
	"github.com/lockgen/lockgen/runtime/internal/hub"
	"github.com/lockgen/lockgen/runtime/internal/lockenv"
	"github.com/lockgen/lockgen/runtime/internal/scripts"
)

// Latch is the engine of a count-down latch (runtime.Latch): its channel
// is redisson_countdownlatch__channel__{key} (the braces always added),
// where "0" says the count reached zero.
type Latch struct{ counter }

// Init makes l the latch at key, named name.
func (l *Latch) Init(env *lockenv.Env, key, name string) {
	l.counter = counter{env: env, key: key, name: name, channel: "redisson_countdownlatch__channel__{" + key + "}"}
}

// TrySet arms the latch with count n if it is not armed, and reports
// whether it did. It is sent once: a copy would find the latch this call
// armed and report that it did not.
func (l *Latch) TrySet(ctx context.Context, n int) (bool, error) {
	set, err := scripts.LatchTrySet.RunOnce(ctx, l.env.RDB, 2, []any{3: l.key, l.channel, n, l.env.Publish}).Int64()
	return set == 1, l.fail("arm", err)
}

// CountDown counts the latch down by one, within ctx and the Client's
// ReleaseTimeout. It is sent again only when Redis refused it before it
// ran: a lost reply is an unknown outcome.
func (l *Latch) CountDown(ctx context.Context) error {
	return l.fail("count-down", l.env.Calls.ResendRefused(ctx, func(ctx context.Context) error {
		return scripts.LatchCountDown.RunOnce(ctx, l.env.RDB, 2, []any{3: l.key, l.channel, l.env.Publish}).Err()
	}))
}

// Count is the latch's count: 0 when it is released or not armed.
func (l *Latch) Count(ctx context.Context) (int64, error) {
	n, err := l.count(ctx)
	return max(n, 0), l.fail("inspect", err)
}

// Delete deletes the latch, publishing "1", which wakes no waiter, and
// reports whether it existed. It is sent once: a copy would find the latch
// gone and report that it deleted nothing.
func (l *Latch) Delete(ctx context.Context) (bool, error) {
	n, err := scripts.LatchDelete.RunOnce(ctx, l.env.RDB, 2, []any{3: l.key, l.channel, l.env.Publish}).Int64()
	return n == 1, l.fail("delete", err)
}

// Await waits up to wait (0: one check; < 0: until ctx is done) for the
// count to reach zero: it wakes on "0" (hub.WakeZero), and checks again
// once subscribed and whenever the pub/sub connection was replaced.
func (l *Latch) Await(ctx context.Context, wait time.Duration) error {
	try := func(ctx context.Context) (bool, time.Duration, error) {
		n, err := l.count(ctx)
		return err == nil && n <= 0, -1, err // -1: no expiry, sleep until the message
	}
	err := l.env.Waits.Await(ctx, await.Spec{Channel: l.channel, Wait: wait, Wake: hub.WakeZero}, try)
	if errors.Is(err, errs.NotAcquired) {
		err = fmt.Errorf("%w: the latch was not released within %v", errs.NotAcquired, wait)
	}
	return l.fail("await", err)
}
