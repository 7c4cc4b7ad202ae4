package latch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime/internal/await"
	"github.com/lockgen/lockgen/runtime/internal/errs"
	"github.com/lockgen/lockgen/runtime/internal/hub"
	"github.com/lockgen/lockgen/runtime/internal/lockenv"
	"github.com/lockgen/lockgen/runtime/internal/scripts"
)

// Latch is the engine of one count-down latch handle (runtime.Latch). Its
// methods return errors made by Env.Fail (runtime's *LockError).
type Latch struct {
	env     *lockenv.Env
	key     string
	name    string
	channel string
}

// Init makes l the latch at key, named name.
func (l *Latch) Init(env *lockenv.Env, key, name string) {
	*l = Latch{env: env, key: key, name: name, channel: Channel(key)}
}

// Channel is Redisson's RCountDownLatch channel: the braces are always
// added, whatever the name holds.
func Channel(key string) string { return "redisson_countdownlatch__channel__{" + key + "}" }

// Key is the Redis key of the count.
func (l *Latch) Key() string { return l.key }

func (l *Latch) fail(op string, err error) error { return l.env.Fail(op, l.name, l.key, err) }

// TrySet arms the latch with count n if it is not armed, and reports
// whether it did. It is sent once: a copy after a lost reply would find
// the latch this call armed and report that it did not.
func (l *Latch) TrySet(ctx context.Context, n int) (bool, error) {
	set, err := scripts.LatchTrySet.RunOnce(ctx, l.env.RDB, 2, []any{3: l.key, l.channel, n, l.env.Publish}).Int64()
	if err != nil {
		return false, l.fail("arm", err)
	}
	return set == 1, nil
}

// CountDown counts the latch down by one (see runtime.Latch.CountDown).
// It is sent once: a lost reply is an unknown outcome.
func (l *Latch) CountDown(ctx context.Context) error {
	err := scripts.LatchCountDown.RunOnce(ctx, l.env.RDB, 2, []any{3: l.key, l.channel, l.env.Publish}).Err()
	switch {
	case err == nil:
		return nil
	case scripts.IsReply(err), scripts.NotSent(err):
		return l.fail("count-down", err)
	}
	return l.fail("count-down", fmt.Errorf("%w: %w", errs.OutcomeUnknown, err))
}

// count reads the count: 0 when the key is absent (released, or never
// armed).
func (l *Latch) count(ctx context.Context) (int64, error) {
	n, err := scripts.Do(ctx, l.env.RDB, "get", l.key).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return max(n, 0), err
}

// Count is the latch's count: 0 when it is released or not armed.
func (l *Latch) Count(ctx context.Context) (int64, error) {
	n, err := l.count(ctx)
	if err != nil {
		return 0, l.fail("inspect", err)
	}
	return n, nil
}

// Delete deletes the latch, publishing "1", which wakes no waiter. It
// reports whether it existed.
func (l *Latch) Delete(ctx context.Context) (bool, error) {
	n, err := scripts.LatchDelete.Run(ctx, l.env.RDB, 2, []any{3: l.key, l.channel, l.env.Publish}).Int64()
	if err != nil {
		return false, l.fail("delete", err)
	}
	return n == 1, nil
}

// Await waits up to wait (0: one check; < 0: until ctx is done) for the
// count to reach zero, in the Client's wait loop: it wakes on the "0"
// message (hub.WakeZero), and checks again once subscribed and whenever
// the pub/sub connection was replaced.
func (l *Latch) Await(ctx context.Context, wait time.Duration) error {
	try := func(ctx context.Context) (bool, time.Duration, error) {
		n, err := l.count(ctx)
		return err == nil && n == 0, -1, err // -1: no expiry, sleep until the message
	}
	err := l.env.Waits.Await(ctx, await.Spec{Channel: l.channel, Wait: wait, Wake: hub.WakeZero}, try)
	if errors.Is(err, errs.NotAcquired) {
		err = fmt.Errorf("%w: the latch was not released within %v", errs.NotAcquired, wait)
	}
	if err != nil {
		return l.fail("await", err)
	}
	return nil
}
