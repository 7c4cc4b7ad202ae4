package runtime_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockgen/lockgen/runtime"
)

// Shutdown lets running work finish: a new acquisition fails at once, a
// waiter stops waiting, a re-entry of the running hold still works, and
// Shutdown returns once the holder released.
func TestShutdownDrainsRunningHoldsAndRefusesNewOnes(t *testing.T) {
	_, _, c := setup(t, nil)
	ctx := ctxT(t)
	m := c.Mutex("drain:a", runtime.LockOptions{})
	hctx, err := m.TryLock(ctx, 0, runtime.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	waiter := make(chan error, 1)
	go func() {
		_, err := c.Mutex("drain:a", runtime.LockOptions{}).TryLock(ctx, 10*time.Second, runtime.Watchdog)
		waiter <- err
	}()
	time.Sleep(100 * time.Millisecond) // the waiter waits

	shut := make(chan error, 1)
	start := time.Now()
	go func() {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		shut <- c.Shutdown(sctx)
	}()
	select {
	case err := <-waiter:
		if !errors.Is(err, runtime.ErrDraining) {
			t.Fatalf("the waiter got %v, want ErrDraining", err)
		}
		if d := time.Since(start); d > 500*time.Millisecond {
			t.Errorf("the waiter stopped %v after Shutdown began", d)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the waiter was not stopped by Shutdown")
	}
	time.Sleep(20 * time.Millisecond)
	if _, err := c.Mutex("drain:b", runtime.LockOptions{}).TryLock(ctx, time.Second, runtime.Watchdog); !errors.Is(err, runtime.ErrDraining) {
		t.Fatalf("a new acquisition during Shutdown: %v, want ErrDraining", err)
	}
	// Running work may still take what it needs.
	inner, err := m.TryLock(hctx, 0, runtime.Watchdog)
	if err != nil {
		t.Fatalf("a re-entry of the running hold during Shutdown: %v", err)
	}
	nested, err := c.Mutex("drain:c", runtime.LockOptions{}).TryLock(hctx, 0, runtime.Watchdog)
	if err != nil {
		t.Fatalf("a nested lock of the running work during Shutdown: %v", err)
	}
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v while a hold was running", err)
	case <-time.After(200 * time.Millisecond):
	}
	for _, u := range []struct {
		m   *runtime.Mutex
		ctx context.Context
	}{{c.Mutex("drain:c", runtime.LockOptions{}), nested}, {m, inner}, {m, hctx}} {
		if err := u.m.Unlock(u.ctx); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-shut:
		if err != nil {
			t.Fatalf("Shutdown = %v after every hold ended on its own", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Shutdown did not return after the last hold was released")
	}
	if hctx.Err() == nil {
		t.Error("a released hold's ctx is not done")
	}
}

// Holds still running when Shutdown's ctx ends are cut: their ctx is
// cancelled with ErrDraining and their locks are given back in Redis at
// once, so another process does not wait out the lease.
func TestShutdownCutsWhatOutlivesItsCtxAndGivesItBack(t *testing.T) {
	_, rdb, other := setup(t, nil)
	c := newClient(t, rdb, &runtime.Options{WatchdogTimeout: 30 * time.Second})
	ctx := ctxT(t)
	held := map[string]context.Context{}
	for _, key := range []string{"cut:a", "cut:b"} {
		h, err := c.Mutex(key, runtime.LockOptions{}).TryLock(ctx, 0, runtime.Watchdog)
		if err != nil {
			t.Fatal(err)
		}
		held[key] = h
	}
	sem := c.Semaphore("cut:sem", runtime.SemaphoreOptions{Permits: 1})
	if _, err := sem.TryAcquire(ctx, 1, 0); err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := c.Shutdown(sctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown = %v, want its ctx's error", err)
	}
	t.Logf("Shutdown took %v", time.Since(start))
	for key, h := range held {
		if !errors.Is(context.Cause(h), runtime.ErrDraining) {
			t.Errorf("%s: the cut hold's cause is %v, want ErrDraining", key, context.Cause(h))
		}
		if _, err := other.Mutex(key, runtime.LockOptions{}).TryLock(ctx, 0, runtime.Watchdog); err != nil {
			t.Errorf("%s: another Client could not take the cut lock at once: %v", key, err)
		}
	}
	if _, err := other.Semaphore("cut:sem", runtime.SemaphoreOptions{Permits: 1}).TryAcquire(ctx, 1, 0); err != nil {
		t.Errorf("the cut permit was not given back: %v", err)
	}
}
