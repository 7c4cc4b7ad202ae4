package semaphore

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
	"github.com/lockgen/lockgen/runtime/internal/settle"
)

// counter is what Sem, Plain and Latch are made of: a count at key, with its channel.
type counter struct {
	env                *lockenv.Env
	key, name, channel string
}

// Key is the Redis key of the count.
func (c *counter) Key() string { return c.key }

// Channel is the pub/sub channel its changes are published on.
func (c *counter) Channel() string { return c.channel }

// Name is the counter's name in errors.
func (c *counter) Name() string { return c.name }

// fail wraps err (nil: none) as the error of op.
func (c *counter) fail(op string, err error) error {
	if err == nil {
		return nil
	}
	return c.env.Fail(op, c.name, c.key, err)
}

// count reads the count: 0 when it is absent, and beside an error (a
// count out of int64's range parses as its bound).
func (c *counter) count(ctx context.Context) (int64, error) {
	n, err := scripts.Do(ctx, c.env.RDB, "get", c.key).Int64()
	if err != nil {
		if errors.Is(err, redis.Nil) {
			err = nil
		}
		return 0, err
	}
	return n, nil
}

// TrySetPermits sets the free count to n only when it is absent
// (Redisson trySetPermits), for a semaphore of either layout, and reports
// whether it did. It is sent once: a copy after a lost reply would find
// the count this call set and report that it did not.
func (c *counter) TrySetPermits(ctx context.Context, n int) (bool, error) {
	if n < 0 {
		return false, c.fail("set-permits", fmt.Errorf("%w: negative permits %d", errs.InvalidArgument, n))
	}
	set, err := scripts.SemaphoreTrySet.RunOnce(ctx, c.env.RDB, 2, []any{3: c.key, c.channel, n, c.env.Publish}).Int64()
	return set == 1, c.fail("set-permits", err)
}

// Plain is the engine of a plain semaphore (runtime.PlainSemaphore): its
// permits have no ids and no leases, so an acquire or release whose reply
// was lost is not resent, and reports an unknown outcome. A release
// refused before it ran is sent again: nothing else would ever give its
// permits back.
type Plain struct{ counter }

// Init makes p the plain semaphore at key, named name.
func (p *Plain) Init(env *lockenv.Env, key, name string) {
	p.counter = counter{env: env, key: key, name: name, channel: channelName(key)}
}

// Acquire waits up to wait (0: one try; < 0: until ctx is done) to take n permits.
func (p *Plain) Acquire(ctx context.Context, n int, wait time.Duration) error {
	p.env.Acquiring.Add(1)
	defer p.env.Acquiring.Add(-1)
	try := func(ctx context.Context) (bool, time.Duration, error) {
		took, err := scripts.PlainSemaphoreAcquire.RunOnce(ctx, p.env.RDB, 1, []any{3: p.key, n}).Int64()
		if pd := scripts.Abandoned(err); pd != nil {
			p.resolveLate(pd, n) // gives back what a late reply took
		}
		return took == 1, -1, err // -1: no leases, sleep until a release
	}
	w := await.Spec{Channel: p.channel, Wait: wait, Wake: hub.WakeCount, Need: n, Unsettled: true}
	return p.fail("acquire", p.env.Waits.Await(ctx, w, try))
}

// Release gives back n permits and wakes that many waiters, detached from
// ctx's cancellation, with the Client's ReleaseTimeout.
func (p *Plain) Release(ctx context.Context, n int) error {
	dctx, cancel := p.env.Calls.Detached(p.env.Calls.Yield(ctx, p.key))
	defer cancel()
	return p.fail("release", p.add(dctx, n))
}

// AddPermits adds n (which may be negative) to the free count, waking
// waiters for those freed, within ctx and the Client's ReleaseTimeout.
func (p *Plain) AddPermits(ctx context.Context, n int) error {
	if n == 0 {
		return nil
	}
	return p.fail("set-permits", p.add(ctx, n))
}

// add adds n to the free count and wakes waiters for what came free. A
// copy would add the permits twice: it is sent again only when Redis
// refused it before it ran (BUSY, LOADING, READONLY, OOM...), never after
// a lost reply.
func (p *Plain) add(ctx context.Context, n int) error {
	return p.env.Calls.ResendRefused(ctx, func(ctx context.Context) error {
		return scripts.PlainSemaphoreRelease.RunOnce(ctx, p.env.RDB, 2, []any{3: p.key, p.channel, n, p.env.Publish}).Err()
	})
}

// Available is the free count (0 when absent).
func (p *Plain) Available(ctx context.Context) (int, error) {
	n, err := p.count(ctx)
	return int(n), p.fail("inspect", err)
}

// resolveLate takes over an acquire of n permits its caller abandoned
// (told errs.OutcomeUnknown): what the late reply took is given back, sent
// once as every change of the count (again only when it never left or was
// refused before it ran). No reply leaves the outcome unknown for good
// (no ids to settle by).
func (p *Plain) resolveLate(pd *scripts.Pending, n int) {
	c := p.env
	c.Then(pd, func(cmd *redis.Cmd) {
		took, err := cmd.Int64()
		switch {
		case !lockenv.Replied(err):
			c.Warn("an acquire abandoned at its deadline had no reply: its permits may be taken", "semaphore", p.name, "key", p.key, "permits", n)
			return
		case err != nil || took != 1:
			return
		}
		c.Settler.Add(settle.Job{
			Try: func(ctx context.Context) bool {
				err := scripts.PlainSemaphoreRelease.RunOnce(ctx, c.Renewal, 2, []any{3: p.key, p.channel, n, c.Publish}).Err()
				if err != nil && !lockenv.Replied(err) {
					c.Warn("giving back the permits of an abandoned acquire failed: Redis did not answer", "semaphore", p.name, "key", p.key, "permits", n)
				}
				return !scripts.NotSent(err) && !scripts.Refused(err)
			},
			Until: time.Now().Add(c.GiveBackFor()),
		})
	})
}
