package runtime_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/runtime"
)

// A change of a count sent once, called with a ctx whose deadline has
// passed already, never left the client: go-redis refuses a done ctx
// before it writes. It is refused (the ctx's error), not reported as an
// unknown outcome that the caller would have to settle by reading the
// count. On a client that does not honour deadlines (go-redis' default,
// ContextTimeoutEnabled false) the call runs aside and the caller stops
// waiting at once, before the goroutine has even been refused.
func TestAChangeSentOnceWithADoneCtxIsNotAnUnknownOutcome(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr()}) // ContextTimeoutEnabled: false
	t.Cleanup(func() { _ = rdb.Close() })
	c := newClient(t, rdb, nil)
	ctx := context.Background()
	warm := c.Semaphore("warm", runtime.SemaphoreOptions{})
	if _, err := warm.TrySetPermits(ctx, 1); err != nil { // a connection open
		t.Fatal(err)
	}
	done, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancel()
	ignore := func(_ bool, err error) error { return err }
	for _, ch := range []struct {
		name string
		do   func(ctx context.Context) error
	}{
		{"semaphore try-set", func(ctx context.Context) error {
			return ignore(c.Semaphore("s1", runtime.SemaphoreOptions{}).TrySetPermits(ctx, 3))
		}},
		{"semaphore add", func(ctx context.Context) error {
			return c.Semaphore("s2", runtime.SemaphoreOptions{}).AddPermits(ctx, 3)
		}},
		{"plain semaphore add", func(ctx context.Context) error { return c.PlainSemaphore("p1", "p1").AddPermits(ctx, 3) }},
		{"plain semaphore try-set", func(ctx context.Context) error {
			return ignore(c.PlainSemaphore("p2", "p2").TrySetPermits(ctx, 3))
		}},
		{"latch arm", func(ctx context.Context) error {
			return ignore(c.Latch("l1", runtime.LatchOptions{Count: 3}).Arm(ctx))
		}},
		{"latch count-down", func(ctx context.Context) error {
			return c.Latch("l2", runtime.LatchOptions{Count: 3}).CountDown(ctx)
		}},
	} {
		for i := 0; i < 20; i++ {
			err := ch.do(done)
			if err == nil {
				t.Errorf("%s: succeeded on a done ctx", ch.name)
				break
			}
			if errors.Is(err, runtime.ErrOutcomeUnknown) {
				t.Errorf("%s with a ctx done before the call: %v, want the ctx's error: nothing was sent", ch.name, err)
				break
			}
		}
	}
}
