package runtime_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/runtime"
	"github.com/redis/go-redis/v9"
)

// While the watchdog's renewals run behind, a fresh acquisition waits in
// the admission gate (holds before admissions), but never fails for it:
// one with a wait time makes its try before that time is up, one that
// waits forever goes on when the gate opens. Work that already holds a
// lock of the Client is never held back.
func TestFreshAcquisitionsWaitWhileRenewalsRunBehind(t *testing.T) {
	rdb, c, _, hold, release := closedGate(t, "gate:held")
	ctx := ctxT(t)

	// Running work: a lock taken under a hold's ctx. Waiting forever in
	// the gate, it would never return.
	inner := c.Mutex("gate:inner", runtime.LockOptions{})
	ih, err := inner.TryLock(hold, runtime.Forever, runtime.Watchdog)
	if err != nil {
		t.Fatalf("running work held back: %v", err)
	}
	if err := inner.Unlock(ih); err != nil {
		t.Fatal(err)
	}
	// Fresh acquisitions with a wait time, and a single try: they get the
	// free lock although the gate stays closed.
	for _, wait := range []time.Duration{0, 200 * time.Millisecond} {
		m := c.Mutex("gate:bounded", runtime.LockOptions{})
		h, err := m.TryLock(ctx, wait, runtime.Watchdog)
		if err != nil {
			t.Fatalf("wait %v: a free lock not taken with the gate closed: %v", wait, err)
		}
		if err := m.Unlock(h); err != nil {
			t.Fatal(err)
		}
	}
	if !runtime.AdmissionClosed(c) {
		t.Fatal("the gate opened while renewals still ran behind")
	}
	// A fresh acquisition without a wait bound waits for the gate.
	fresh := c.Mutex("gate:fresh", runtime.LockOptions{})
	got := make(chan error, 1)
	go func() {
		h, err := fresh.TryLock(ctx, runtime.Forever, runtime.Watchdog)
		if err == nil {
			err = fresh.Unlock(h)
		}
		got <- err
	}()
	time.Sleep(100 * time.Millisecond)
	if n, _ := rdb.Exists(ctx, "gate:fresh").Result(); n != 0 {
		t.Fatal("a fresh acquisition took its lock with the gate closed")
	}
	select {
	case err := <-got:
		t.Fatalf("a fresh acquisition returned with the gate closed: %v", err)
	default:
	}
	release()
	if err := <-got; err != nil {
		t.Fatalf("after the gate opened: %v", err)
	}
	// Open: the fresh acquisition passed it. A loaded machine may put a
	// renewal round behind again at once (a full run beside other work,
	// load 3.6, found it closed right after), so it must open, not stay.
	eventually(t, 5*time.Second, "the gate open after renewals caught up", func() bool { return !runtime.AdmissionClosed(c) })
	// Its ctx ends a wait in the gate, with the ctx's error.
	release = runtime.StallRenewals(c)
	defer release()
	eventually(t, 5*time.Second, "the gate closes again", func() bool { return runtime.AdmissionClosed(c) })
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := fresh.TryLock(cctx, runtime.Forever, runtime.Watchdog); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ctx ended in the gate: %v, want its error", err)
	}
	if hold.Err() != nil {
		t.Fatalf("the held lock lost: %v", context.Cause(hold))
	}
}

// While the watchdog's renewals run behind, a release waits a little
// (20ms at most) before it is sent, so that a flood of
// releases does not take what the renewals of the holds not yet released
// need; its hold's ctx ends first, and the release still goes through.
func TestReleasesYieldWhileRenewalsRunBehind(t *testing.T) {
	rdb, _, m, hold, release := closedGate(t, "gate:release")
	defer release()
	ctx := ctxT(t)
	start := time.Now()
	if err := m.Unlock(hold); err != nil {
		t.Fatalf("a release with the gate closed: %v", err)
	}
	if took := time.Since(start); took < 20*time.Millisecond {
		t.Fatalf("the release was sent after %v: it did not yield to the renewals", took)
	}
	if hold.Err() == nil {
		t.Fatal("the hold's ctx outlived its release")
	}
	if n, _ := rdb.Exists(ctx, "gate:release").Result(); n != 0 {
		t.Fatal("the lock is still held after its release")
	}
}

// A fresh acquisition held back in a closed admission gate is a waiter
// that is not part of running work: when Shutdown begins meanwhile it
// stops with ErrDraining (Shutdown, step 1), rather than going on to take
// the lock once the gate lets it through, a new hold that Shutdown then
// has to wait for or cut (a review's finding; a wait with a wait time
// waits in the gate until a little before its end, a single try 20 ms).
func TestAnAcquisitionInAClosedGateStopsWhenShutdownBegins(t *testing.T) {
	_, c, held, hold, release := closedGate(t, "drain:held")
	ctx := ctxT(t)

	fresh := c.Mutex("drain:fresh", runtime.LockOptions{})
	got := make(chan error, 1)
	go func() {
		h, err := fresh.TryLock(ctx, 2*time.Second, runtime.Watchdog)
		if err == nil {
			_ = fresh.Unlock(h)
		}
		got <- err
	}()
	time.Sleep(200 * time.Millisecond) // in the gate
	sctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- c.Shutdown(sctx) }()
	err := <-got
	_ = held.Unlock(hold)
	release()
	<-shut
	if !errors.Is(err, runtime.ErrDraining) {
		t.Fatalf("an acquisition waiting in the gate when Shutdown began: %v, want ErrDraining", err)
	}
}

// closedGate starts a Client with a watchdog hold on key and stalls its
// renewals until its admission gate closes. It returns the Client, the
// hold, and the function that lets the renewals go on.
func closedGate(t *testing.T, key string) (rdb redis.UniversalClient, c *runtime.Client, m *runtime.Mutex, hold context.Context, release func()) {
	t.Helper()
	rdb = redistest.Start(t).Client(t)
	c = newClient(t, rdb, &runtime.Options{WatchdogTimeout: 3 * time.Second})
	m = c.Mutex(key, runtime.LockOptions{})
	hold, err := m.TryLock(ctxT(t), 0, runtime.Watchdog) // starts the watchdog loop
	if err != nil {
		t.Fatal(err)
	}
	release = runtime.StallRenewals(c)
	eventually(t, 5*time.Second, "the gate closes", func() bool { return runtime.AdmissionClosed(c) })
	return rdb, c, m, hold, release
}
