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

// A server short of the replicas its min-replicas-to-write asks for
// (NOREPLICAS), or one that could not persist while
// stop-writes-on-bgsave-error is on (MISCONF), refuses every write before
// it runs, as a replica does (READONLY): a single try ends with
// ErrUnavailable, a waiter goes on waiting and takes the lock once writes
// are served again. Both ended the call with Redis' bare error, a waiter's
// wait with it.
func TestAServerRefusingWritesForAWhileIsWaitedOut(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		refuse, end func(ctx context.Context, admin *redis.Client) error
	}{
		{"NOREPLICAS",
			func(ctx context.Context, admin *redis.Client) error {
				return admin.ConfigSet(ctx, "min-replicas-to-write", "1").Err()
			},
			func(ctx context.Context, admin *redis.Client) error {
				return admin.ConfigSet(ctx, "min-replicas-to-write", "0").Err()
			}},
		{"MISCONF",
			func(ctx context.Context, admin *redis.Client) error {
				// A snapshot that cannot be written: /proc takes no files.
				for _, kv := range [][2]string{{"save", "3600 1"}, {"dir", "/proc/self"}} {
					if err := admin.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
						return err
					}
				}
				if err := admin.BgSave(ctx).Err(); err != nil {
					return err
				}
				for { // until the failed snapshot is on record
					err := admin.Set(ctx, "probe", 1, 0).Err()
					if err != nil && redis.HasErrorPrefix(err, "MISCONF") || ctx.Err() != nil {
						return ctx.Err()
					}
					time.Sleep(10 * time.Millisecond)
				}
			},
			func(ctx context.Context, admin *redis.Client) error {
				return admin.ConfigSet(ctx, "stop-writes-on-bgsave-error", "no").Err()
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := redistest.Start(t, redistest.Arg("--enable-protected-configs", "yes"))
			admin, ctx := s.Client(t), ctxT(t)
			c := newClient(t, s.Client(t), &runtime.Options{ReleaseTimeout: 300 * time.Millisecond})
			m := c.Mutex("refused", runtime.LockOptions{})
			if err := tc.refuse(ctx, admin); err != nil {
				t.Fatal(err)
			}
			if _, err := m.TryLock(ctx, 0, runtime.Watchdog); !errors.Is(err, runtime.ErrUnavailable) {
				t.Fatalf("a single try refused with %s: %v, want ErrUnavailable", tc.name, err)
			}
			got := waitThenUnlock(func() (context.Context, error) { return m.TryLock(ctx, 10*time.Second, runtime.Watchdog) }, m.Unlock)
			stillWaits(t, got, 500*time.Millisecond, "writes were refused")
			if err := tc.end(ctx, admin); err != nil {
				t.Fatal(err)
			}
			takesTheLock(t, got, 5*time.Second, "writes were served")
		})
	}
}
