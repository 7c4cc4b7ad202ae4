package runtime_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockgen/lockgen/internal/runtimetest"
	"github.com/lockgen/lockgen/runtime"
)

func TestWatchdogKeepsHoldAliveAndStopsAtRelease(t *testing.T) {
	skipShortOutsideCI(t)
	const timeout = time.Second
	e, cc := setupCounted(t, &runtime.Options{WatchdogTimeout: timeout})
	rdb := e.rdb
	ctx := ctxT(t)
	m := e.c.Mutex("watched", runtime.LockOptions{})
	h, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// 2 s: two leases, renewed every third of one; a hold the watchdog
	// did not keep would have expired by the third check.
	for i := 0; i < 4; i++ {
		time.Sleep(500 * time.Millisecond)
		ttl, _ := rdb.PTTL(ctx, "watched").Result()
		if ttl <= 0 || ttl > timeout {
			t.Fatalf("after %v: PTTL %v, want in (0, %v]", time.Duration(i+1)*500*time.Millisecond, ttl, timeout)
		}
		if h.Err() != nil {
			t.Fatalf("hold ctx ended while renewed: %v", context.Cause(h))
		}
	}
	cc.start()
	if err := m.Unlock(h); err != nil {
		t.Fatal(err)
	}
	if n, _ := rdb.Exists(ctx, "watched").Result(); n != 0 {
		t.Fatal("key still there after release")
	}
	before := cc.n.Load()
	time.Sleep(2 * timeout / 3)
	if after := cc.n.Load(); after != before {
		t.Fatalf("%d commands sent after release: a renewal outlived the unlock", after-before)
	}
}

func TestFixedLeaseExpiresAndEndsHoldContextFirst(t *testing.T) {
	_, rdb, c := setup(t, nil)
	ctx, lag := ctxT(t), runtimetest.StartLagMeter(t)
	const lease = 500 * time.Millisecond
	m := c.Mutex("fixed", runtime.LockOptions{Lease: lease})
	start := time.Now()
	h, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ttl, _ := rdb.PTTL(ctx, "fixed").Result(); ttl <= 0 || ttl > lease {
		t.Fatalf("PTTL = %v, want (0, %v]", ttl, lease)
	}
	// The promise, judged as the fault matrix judges it: the ctx's
	// deadline comes before Redis expires the key, and the ctx ends by
	// its deadline, as late as this process's timers run. A stamp taken
	// when this goroutine saw Done was 507 ms after the call on a loaded
	// CI box, its deadline (490 ms after the send) being right.
	dl, ok := h.Deadline()
	exp, err := rdb.PExpireTime(ctx, "fixed").Result()
	if err != nil {
		t.Fatal(err)
	}
	expires := time.Unix(0, 0).Add(exp)
	if !ok || !dl.Before(expires) {
		t.Fatalf("hold ctx deadline %v after the call, Redis expires the key %v after it: want the ctx first", dl.Sub(start), expires.Sub(start))
	}
	<-h.Done()
	if late := time.Since(dl); late > time.Second+lag.Worst(dl, dl.Add(late)) {
		t.Fatalf("hold ctx done %v after its deadline: the lease clock ran late (this process ran its timers %v late)", late, lag.Worst(dl, dl.Add(late)))
	}
	if !errors.Is(context.Cause(h), runtime.ErrLockLost) {
		t.Fatalf("cause = %v, want ErrLockLost", context.Cause(h))
	}
	if n, _ := rdb.Exists(ctx, "fixed").Result(); n != 1 && time.Now().Before(expires.Add(-5*time.Millisecond)) {
		t.Fatal("key gone before the lease ran out")
	}
	eventually(t, lease, "key expires at the lease", func() bool {
		n, _ := rdb.Exists(ctx, "fixed").Result()
		return n == 0
	})
	if d := time.Since(start); d < lease-20*time.Millisecond {
		t.Fatalf("key expired after %v, before the lease", d)
	}
	// Never renewed: the release reports the loss.
	if err := m.Unlock(h); !errors.Is(err, runtime.ErrLockLost) {
		t.Fatalf("Unlock after expiry: %v, want ErrLockLost", err)
	}
}

func TestLostLockCancelsHoldContext(t *testing.T) {
	skipShortOutsideCI(t)
	t.Parallel() // servers of its own; its bounds are hundreds of ms or more
	forEachKind(t, append(exclusiveKinds, readKind), testLostLock)
}

func testLostLock(t *testing.T, k lockKind) {
	const timeout = 900 * time.Millisecond
	for _, tc := range []struct {
		name string
		lose func(*testing.T, *env)
	}{
		{"key deleted", func(t *testing.T, e *env) { e.rdb.Del(context.Background(), "lost") }},
		{"FLUSHALL", func(t *testing.T, e *env) { e.rdb.FlushAll(context.Background()) }},
		{"server restarted", func(t *testing.T, e *env) { e.srv.Restart() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lag := runtimetest.StartLagMeter(t)
			e := newEnv(t, &runtime.Options{WatchdogTimeout: timeout})
			m := k.new(e.c, "lost", runtime.LockOptions{Name: "Lost"})
			h, err := m.Lock(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			tc.lose(t, e)
			const bound = timeout/3 + 300*time.Millisecond
			lostAt := time.Now()
			select {
			case <-h.Done():
			case <-time.After(5 * time.Second):
				t.Fatalf("hold ctx not cancelled within 5s of the loss")
			}
			// Within the next renewal and slack, unless the process
			// itself was not run (its timers as late).
			if d := time.Since(lostAt); d > bound {
				if late := lag.Worst(lostAt, lostAt.Add(d)); d > bound+late {
					t.Fatalf("hold ctx cancelled %v after the loss, past timeout/3 + slack (%v; this process ran timers %v late)", d, bound, late)
				}
			}
			t.Logf("cancelled %v after the loss", time.Since(lostAt))
			cause := context.Cause(h)
			var le *runtime.LockError
			if !errors.Is(cause, runtime.ErrLockLost) || !errors.As(cause, &le) || le.Name != "Lost" {
				t.Fatalf("cause = %v, want ErrLockLost naming the lock", cause)
			}
			if err := m.Unlock(h); !errors.Is(err, runtime.ErrLockLost) {
				t.Fatalf("Unlock of a lost hold: %v, want ErrLockLost", err)
			}
			// The lock is usable again.
			h2, err := m.TryLock(ctxT(t), time.Second, runtime.Watchdog)
			if err != nil {
				t.Fatal(err)
			}
			_ = m.Unlock(h2)
		})
	}
}

func TestDoReportsLostLockEvenWhenFnSucceeds(t *testing.T) {
	_, rdb, c := setup(t, &runtime.Options{WatchdogTimeout: 600 * time.Millisecond})
	m := c.Mutex("lost-in-do", runtime.LockOptions{})
	err := m.Do(ctxT(t), func(ctx context.Context) error {
		rdb.Del(ctx, "lost-in-do")
		<-ctx.Done()
		return nil
	})
	if !errors.Is(err, runtime.ErrLockLost) {
		t.Fatalf("Do = %v, want ErrLockLost", err)
	}
}
