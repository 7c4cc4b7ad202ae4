package runtime_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/internal/runtimetest"
	"github.com/lockgen/lockgen/runtime"
)

// Once Unlock begins, the hold's ctx is done before the release reaches
// Redis: the moment Redis runs it, another owner may take the lock, and
// work still running under the old hold's ctx (a goroutine the holder
// started with it) must have been told to stop by then. A slow release
// (here: Redis pausing writes) used to leave that ctx live until the
// reply came, with the hold already gone from the watchdog and the lease
// clock.
func TestUnlockEndsTheHoldsCtxBeforeTheReleaseIsSent(t *testing.T) {
	for _, k := range runtimetest.Kinds {
		t.Run(k.Name, func(t *testing.T) {
			// Servers of its own, and most of it a 400 ms pause: the
			// kinds run side by side (alone with each other: the test
			// is not parallel with others).
			t.Parallel()
			servers := redistest.StartN(t, 3)
			var rdbs []redis.UniversalClient
			for _, s := range servers {
				rdbs = append(rdbs, s.Client(t))
			}
			c := newClient(t, rdbs[0], &runtime.Options{RedLockNodes: rdbs})
			ctx := ctxT(t)
			l := k.Holder(c, "unlock-order-"+k.Name)
			hctx, err := l.TryLock(ctx, 0, runtime.Watchdog)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range servers {
				if err := s.Client(t).Do(ctx, "CLIENT", "PAUSE", "400", "WRITE").Err(); err != nil {
					t.Fatal(err)
				}
			}
			done := make(chan error, 1)
			start := time.Now()
			go func() { done <- l.Unlock(hctx) }()
			select {
			case <-hctx.Done():
				if d := time.Since(start); d > 200*time.Millisecond {
					t.Errorf("the hold's ctx ended %v after Unlock began, with its release paused", d)
				}
			case err := <-done:
				t.Fatalf("Unlock returned (%v) before the hold's ctx was done", err)
			case <-time.After(2 * time.Second):
				t.Fatal("the hold's ctx still live 2s after Unlock began")
			}
			if err := <-done; err != nil {
				t.Fatalf("Unlock: %v", err)
			}
		})
	}
}
