package runtime_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockgen/lockgen/runtime"
)

// fitWaitBound is how long a test gives a waiter to take the permits a
// release freed for it: far more than a few round trips on a stalled box,
// far less than the sleep bound it would otherwise wake at (the nearest
// permit's expiry, or the end of its wait).
const fitWaitBound = 3 * time.Second

// permitWait is one waiter of a test: how many permits it asked for and
// how its acquisition ended.
type permitWait struct {
	n   int
	err error
}

// startPermitWaiters starts one goroutine per count in needs, in order,
// each once the one before waits: it acquires that many permits with
// acquire, and reports on the channel returned. idle counts the waiters
// registered and not woken.
func startPermitWaiters(t *testing.T, needs []int, idle func() int, acquire func(n int) error) <-chan permitWait {
	t.Helper()
	got := make(chan permitWait, len(needs))
	for i, n := range needs {
		go func() { got <- permitWait{n, acquire(n)} }()
		eventually(t, 5*time.Second, "the waiters waiting in order", func() bool { return idle() == i+1 })
	}
	// The last one registers before its first try: let that try fail, so
	// that the release's message is all that can wake it.
	time.Sleep(100 * time.Millisecond)
	return got
}

// expectOnlyFitting checks that the waiter for 1 permit, and no other,
// took the permit a release freed.
func expectOnlyFitting(t *testing.T, got <-chan permitWait, released time.Time) {
	t.Helper()
	select {
	case w := <-got:
		if w.n != 1 || w.err != nil {
			t.Fatalf("the waiter for %d permits ended with %v, with 1 permit free", w.n, w.err)
		}
	case <-time.After(fitWaitBound):
		t.Fatalf("the waiter for 1 permit still waits %v after a release freed 1: "+
			"the wake-up went to a waiter needing more, and no further", time.Since(released).Round(time.Millisecond))
	}
	select {
	case w := <-got:
		t.Fatalf("the waiter for %d permits ended with %v, none free", w.n, w.err)
	case <-time.After(100 * time.Millisecond):
	}
}

// endPermitWaiters cancels the waiters left and checks they end so.
func endPermitWaiters(t *testing.T, cancel context.CancelFunc, got <-chan permitWait, left int) {
	t.Helper()
	cancel()
	for range left {
		if w := <-got; !errors.Is(w.err, context.Canceled) {
			t.Errorf("the waiter for %d permits ended with %v, want its ctx's cancellation", w.n, w.err)
		}
	}
}

// A release freeing 1 permit publishes a free count of 1, which wakes one
// waiter: when the longest waiters need more, the wake-up must go on past
// each of them (once) to a waiter it serves, not end with the first.
func TestASemaphoreWakeUpReachesAWaiterItCanServe(t *testing.T) {
	e := newEnv(t, nil)
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	sem := e.c.Semaphore("wake-fit", runtime.SemaphoreOptions{Permits: 3})
	var held []context.Context
	for range 3 {
		h, err := sem.TryAcquire(ctx, 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, h)
	}
	got := startPermitWaiters(t, []int{3, 2, 1}, func() int { return runtime.SemaphoreIdleWaiters(sem) },
		func(n int) error {
			_, err := sem.TryAcquire(ctx, n, time.Minute) // its sleep bound: the held permits' lease, 30 s
			return err
		})
	released := time.Now()
	if err := sem.Release(held[0]); err != nil {
		t.Fatal(err)
	}
	expectOnlyFitting(t, got, released)
	if n, err := sem.Available(ctx); n != 0 || err != nil {
		t.Fatalf("Available = %d, %v; want 0", n, err)
	}
	endPermitWaiters(t, cancel, got, 2)
}

// The same for a PlainSemaphore, whose waiters have no lease to wake at:
// without the wake-up the waiter for 1 would sleep to the end of its wait.
func TestAPlainSemaphoreWakeUpReachesAWaiterItCanServe(t *testing.T) {
	e := newEnv(t, nil)
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	p := e.c.PlainSemaphore("plain-wake-fit", "PlainWakeFit")
	if ok, err := p.TrySetPermits(ctx, 0); !ok || err != nil {
		t.Fatal(ok, err)
	}
	got := startPermitWaiters(t, []int{3, 2, 1}, func() int { return runtime.PlainSemaphoreIdleWaiters(p) },
		func(n int) error { return p.TryAcquire(ctx, n, time.Minute) })
	released := time.Now()
	if err := p.Release(ctx, 1); err != nil {
		t.Fatal(err)
	}
	expectOnlyFitting(t, got, released)
	if n, err := p.Available(ctx); n != 0 || err != nil {
		t.Fatalf("Available = %d, %v; want 0", n, err)
	}
	endPermitWaiters(t, cancel, got, 2)
}
