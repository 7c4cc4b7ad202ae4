package faulttest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/runtime"
)

// After a Sentinel failover the holder of a lock either still holds it (the
// hash reached the replica and renewals go on against the new master) or
// its ctx is cancelled with ErrLockLost, before anyone else can take the
// lock: never two owners that both believe they hold it.
func TestSentinelFailoverNeverMakesTwoOwners(t *testing.T) {
	skipShortOutsideCI(t)
	t.Parallel() // each case has its own servers and sentinels
	for _, tc := range []struct {
		name     string
		watchdog time.Duration
	}{
		{"lease outlives the failover", 6 * time.Second},
		{"lease shorter than the failover", 1500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := redistest.StartSentinel(t)
			ctx := ctxT(t)
			holderC := newClient(t, st.Client(t), &runtime.Options{WatchdogTimeout: tc.watchdog})
			otherC := newClient(t, st.Client(t), &runtime.Options{WatchdogTimeout: tc.watchdog})
			holder := holderC.Mutex("failover", runtime.LockOptions{})
			h, err := holder.Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			st.Replica().WaitForSync(t, 20*time.Second)
			holderLost := make(chan time.Time, 1)
			context.AfterFunc(h, func() { holderLost <- time.Now() })

			st.Master().Kill()
			st.WaitForFailover(t, 30*time.Second)

			// Try to take the lock from elsewhere until well past one lease.
			other := otherC.Mutex("failover", runtime.LockOptions{})
			deadline := time.Now().Add(tc.watchdog + 3*time.Second)
			var took time.Time
			for time.Now().Before(deadline) {
				oh, err := other.TryLock(ctx, 0, runtime.Watchdog)
				if err == nil {
					took = time.Now()
					_ = other.Unlock(oh)
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			select {
			case lostAt := <-holderLost:
				if !errors.Is(context.Cause(h), runtime.ErrLockLost) {
					t.Fatalf("holder ctx ended with %v, want ErrLockLost", context.Cause(h))
				}
				if !took.IsZero() && took.Before(lostAt) {
					t.Fatalf("another owner took the lock %v before the holder was told it lost it", lostAt.Sub(took))
				}
				t.Logf("holder told of the loss; other owner took it %v later", took.Sub(lostAt))
			default:
				if !took.IsZero() {
					t.Fatal("another owner took the lock while the holder still believes it holds it")
				}
				if n, err := holder.HoldCount(h); err != nil || n != 1 {
					t.Fatalf("holder still holds per its ctx, but Redis says count %d (%v)", n, err)
				}
				t.Log("holder still holds after the failover; the other owner never got in")
				_ = holder.Unlock(h)
			}
		})
	}
}
