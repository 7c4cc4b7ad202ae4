package runtime_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/runtime"
)

// A fresh acquisition held back in a closed admission gate is a waiter
// that is not part of running work: when Shutdown begins meanwhile it
// stops with ErrDraining (Shutdown, step 1), rather than going on to take
// the lock once the gate lets it through, a new hold that Shutdown then
// has to wait for or cut (a review's finding; a wait with a wait time
// waits in the gate until a little before its end, a single try 20 ms).
func TestAnAcquisitionInAClosedGateStopsWhenShutdownBegins(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	c := newClient(t, rdb, &runtime.Options{WatchdogTimeout: 3 * time.Second})
	ctx := ctxT(t)
	held := c.Mutex("drain:held", runtime.LockOptions{})
	hold, err := held.TryLock(ctx, 0, runtime.Watchdog) // starts the watchdog loop
	if err != nil {
		t.Fatal(err)
	}
	release := runtime.StallRenewals(c)
	eventually(t, 5*time.Second, "the gate closes", func() bool { return runtime.AdmissionClosed(c) })

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
	err = <-got
	_ = held.Unlock(hold)
	release()
	<-shut
	if !errors.Is(err, runtime.ErrDraining) {
		t.Fatalf("an acquisition waiting in the gate when Shutdown began: %v, want ErrDraining", err)
	}
}
