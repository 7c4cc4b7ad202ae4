package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/internal/runtimetest"
	"github.com/lockgen/lockgen/runtime"
)

// A Redis that refuses every write for good (a master demoted to a
// replica: READONLY) is a refusal before anything ran, tried again within
// the call's bound: an Unlock returns within ReleaseTimeout, also when its
// release would hand over (this Client waits on the lock too) and falls
// back to a plain release (the two took two ReleaseTimeouts once); a
// waiter returns at the end of its wait, never with ErrNotAcquired.
func TestRefusedCallsKeepTheirBounds(t *testing.T) {
	const releaseTimeout = 300 * time.Millisecond
	for _, maxRetries := range []int{0, -1} { // go-redis' retries (and backoff) on, off
		t.Run(fmt.Sprintf("MaxRetries=%d", maxRetries), func(t *testing.T) {
			lag := runtimetest.StartLagMeter(t)
			s := redistest.Start(t)
			admin := s.Client(t)
			rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: maxRetries})
			t.Cleanup(func() { _ = rdb.Close() })
			c := newClient(t, rdb, &runtime.Options{ReleaseTimeout: releaseTimeout})
			ctx := ctxT(t)
			const key = "readonly"
			m := c.Mutex(key, runtime.LockOptions{})
			h, err := m.TryLock(ctx, 0, 30*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			bg, stop := context.WithCancel(ctx)
			defer stop()
			waited := make(chan error, 1)
			go func() { _, err := m.TryLock(bg, 3*time.Second, runtime.Watchdog); waited <- err }()
			eventually(t, 5*time.Second, "the waiter subscribed", func() bool { return waitersOn(t, admin, key) == 1 })
			time.Sleep(50 * time.Millisecond)

			// A master with nothing to sync from: it keeps its data, refuses writes.
			if err := admin.Do(ctx, "REPLICAOF", "127.0.0.1", "1").Err(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = admin.Do(context.Background(), "REPLICAOF", "NO", "ONE").Err() })
			const bound = releaseTimeout + 100*time.Millisecond
			start := time.Now()
			err = m.Unlock(h)
			d := time.Since(start)
			t.Logf("Unlock on a replica: %v after %v", err, d)
			if d > bound {
				if late := lag.Worst(start, start.Add(d)); d > bound+late {
					t.Errorf("Unlock took %v, past ReleaseTimeout %v (this process ran timers %v late)", d, releaseTimeout, late)
				}
			}
			// Refused until the end: the release did not run (go-redis
			// does not resend releases, the Client does), so Redis did not
			// serve it: ErrUnavailable; never a lost lock or a success.
			// (An unknown outcome when a slow machine had the last
			// attempt still in flight at the timeout.)
			if err == nil || errors.Is(err, runtime.ErrLockLost) || !errors.Is(err, runtime.ErrUnavailable) && !errors.Is(err, runtime.ErrOutcomeUnknown) {
				t.Errorf("Unlock: %v, want ErrUnavailable", err)
			}
			// The hand-off to it was refused, its outcome unknown: the
			// waiter's tries were refused from then on, never answered.
			if err := <-waited; errors.Is(err, runtime.ErrNotAcquired) || !errors.Is(err, runtime.ErrUnavailable) && !errors.Is(err, runtime.ErrOutcomeUnknown) {
				t.Errorf("a waiter whose tries were refused for the rest of its wait: %v, want ErrUnavailable (or ErrOutcomeUnknown, of a hand-off)", err)
			}
		})
	}
}
