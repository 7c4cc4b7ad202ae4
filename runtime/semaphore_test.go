package runtime_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockgen/lockgen/internal/runtimetest"
	"github.com/lockgen/lockgen/runtime"
)

func TestSemaphoreAdmitsAtMostPermitsHoldersAcrossProcesses(t *testing.T) {
	t.Parallel() // servers of its own; it checks counts and order, not times
	s, rdb, c := setup(t, nil)
	const permits, procs, goroutines, rounds = 3, 4, 16, 8
	var all [][2]int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := 0; i < procs; i++ {
		cmd, out := startChild(t, "semaphore-worker", "LOCKGEN_ADDR="+s.Addr(), "LOCKGEN_KEY=seats:1",
			"LOCKGEN_PERMITS="+strconv.Itoa(permits), "LOCKGEN_GOROUTINES="+strconv.Itoa(goroutines), "LOCKGEN_ROUNDS="+strconv.Itoa(rounds))
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := readResult(t, cmd, out)
			mu.Lock()
			all = append(all, res.Intervals...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if want := procs * goroutines * rounds; len(all) != want {
		t.Fatalf("%d holds recorded, want %d", len(all), want)
	}
	if most := maxConcurrent(all); most > permits {
		t.Fatalf("%d holders at once, want at most %d", most, permits)
	} else {
		t.Logf("at most %d of %d permits held at once by %d goroutines in %d processes", most, permits, procs*goroutines, procs)
	}
	// No permit leaked: the free count and the held set add up to permits.
	ctx := ctxT(t)
	free, _ := rdb.Get(ctx, "seats:1").Int()
	held, _ := rdb.ZCard(ctx, "{seats:1}:timeout").Result()
	if free+int(held) != permits || held != 0 {
		t.Fatalf("after the run: %d free + %d held, want %d free + 0 held", free, held, permits)
	}
	if n, err := c.Semaphore("seats:1", runtime.SemaphoreOptions{}).Available(ctx); err != nil || n != permits {
		t.Fatalf("Available = %d, %v; want %d", n, err, permits)
	}
}

func TestSemaphoreKilledHoldersPermitComesBackAfterItsLease(t *testing.T) {
	skipShortOutsideCI(t)
	t.Parallel() // servers of its own; it waits out seconds-long timeouts
	const lease = time.Second
	lag := runtimetest.StartLagMeter(t)
	s, _, c := setup(t, &runtime.Options{WatchdogTimeout: lease})
	cmd, out := startChild(t, "semaphore-holder", "LOCKGEN_ADDR="+s.Addr(), "LOCKGEN_KEY=pool", "LOCKGEN_PERMITS=1", "LOCKGEN_WATCHDOG_MS=1000")
	if line, err := out.ReadString('\n'); err != nil || strings.TrimSpace(line) != "held" {
		t.Fatalf("child: %q %v", line, err)
	}
	sem := c.Semaphore("pool", runtime.SemaphoreOptions{Permits: 1})
	// The child's watchdog keeps its permit past one lease.
	time.Sleep(1500 * time.Millisecond)
	if _, err := sem.TryAcquire(ctxT(t), 1, 0); !errors.Is(err, runtime.ErrNotAcquired) {
		t.Fatalf("TryAcquire while the child's watchdog renews: %v, want ErrNotAcquired", err)
	}
	_ = cmd.Process.Kill()
	const bound = lease + 500*time.Millisecond
	killed := time.Now()
	h, err := sem.TryAcquire(ctxT(t), 1, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(killed)
	t.Logf("permit back %v after the holder was killed (lease %v)", took, lease)
	if took > bound {
		if late := lag.Worst(killed, killed.Add(took)); took > bound+late {
			t.Fatalf("permit back %v after the holder was killed, want <= lease + 500ms (this process ran timers %v late)", took, late)
		}
	}
	if err := sem.Release(h); err != nil {
		t.Fatal(err)
	}
}

// A lease of a second: at 300 ms (renewals every 100 ms), a 200 ms stall of
// a loaded test process lost the hold, as it should.
func TestSemaphoreWatchdogKeepsAPermitFourLeases(t *testing.T) {
	skipShortOutsideCI(t)
	t.Parallel() // it waits
	const lease = time.Second
	_, rdb, c := setup(t, &runtime.Options{WatchdogTimeout: lease})
	other := newClient(t, rdb, &runtime.Options{WatchdogTimeout: lease})
	opts := runtime.SemaphoreOptions{Permits: 1}
	sem := c.Semaphore("kept", opts)
	h, err := sem.Acquire(ctxT(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(4 * lease)
	if err := h.Err(); err != nil {
		t.Fatalf("hold ended after 4 leases: %v", context.Cause(h))
	}
	if _, err := other.Semaphore("kept", opts).TryAcquire(ctxT(t), 1, 0); !errors.Is(err, runtime.ErrNotAcquired) {
		t.Fatalf("another client took the renewed permit: %v", err)
	}
	if err := sem.Release(h); err != nil {
		t.Fatal(err)
	}
	if n, _ := sem.Available(ctxT(t)); n != 1 {
		t.Fatalf("Available after release = %d, want 1", n)
	}
}

func TestSemaphoreDeletedKeysCancelHoldersWithErrLockLost(t *testing.T) {
	_, rdb, c := setup(t, &runtime.Options{WatchdogTimeout: 300 * time.Millisecond})
	sem := c.Semaphore("gone", runtime.SemaphoreOptions{Permits: 2})
	a, err := sem.Acquire(ctxT(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := sem.Acquire(ctxT(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	rdb.Del(ctxT(t), "gone", "{gone}:timeout")
	for _, h := range []context.Context{a, b} {
		select {
		case <-h.Done():
		case <-time.After(2 * time.Second):
			t.Fatal("holder's ctx still live after its permits were deleted")
		}
		if !errors.Is(context.Cause(h), runtime.ErrLockLost) {
			t.Fatalf("cause %v, want ErrLockLost", context.Cause(h))
		}
		if err := sem.Release(h); !errors.Is(err, runtime.ErrLockLost) {
			t.Fatalf("Release of a lost permit: %v, want ErrLockLost", err)
		}
	}
}

func TestSemaphoreFixedLeaseEndsTheHoldBeforeThePermitIsReclaimed(t *testing.T) {
	_, rdb, c := setup(t, nil)
	const lease = 200 * time.Millisecond
	sem := c.Semaphore("fixed", runtime.SemaphoreOptions{Permits: 1, Lease: lease})
	h, err := sem.Acquire(ctxT(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	endedAt := make(chan time.Time, 1)
	go func() { <-h.Done(); endedAt <- time.Now() }()
	other := newClient(t, rdb, nil).Semaphore("fixed", runtime.SemaphoreOptions{Permits: 1, Lease: lease})
	h2, err := other.TryAcquire(ctxT(t), 1, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	granted := time.Now()
	if ended := <-endedAt; !ended.Before(granted) {
		t.Fatalf("first hold ended at %v, the next was granted at %v: the ctx must end first", ended, granted)
	}
	if !errors.Is(context.Cause(h), runtime.ErrLockLost) {
		t.Fatalf("cause %v, want ErrLockLost", context.Cause(h))
	}
	_ = other.Release(h2)
}

func TestSemaphorePermitCountOperations(t *testing.T) {
	_, rdb, c := setup(t, nil)
	ctx := ctxT(t)
	sem := c.Semaphore("ops", runtime.SemaphoreOptions{})
	if _, err := sem.TryAcquire(ctx, 1, 0); !errors.Is(err, runtime.ErrNotAcquired) {
		t.Fatalf("acquire of a semaphore never set: %v, want ErrNotAcquired", err)
	}
	if ok, err := sem.TrySetPermits(ctx, 3); !ok || err != nil {
		t.Fatalf("TrySetPermits on an absent count: %v %v", ok, err)
	}
	if ok, _ := sem.TrySetPermits(ctx, 9); ok {
		t.Fatal("TrySetPermits overwrote a count")
	}
	h, err := sem.TryAcquire(ctx, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := sem.Available(ctx); n != 1 {
		t.Fatalf("Available = %d, want 1", n)
	}
	if err := sem.SetPermits(ctx, 5); err != nil {
		t.Fatal(err)
	}
	if n, _ := sem.Available(ctx); n != 3 {
		t.Fatalf("Available after SetPermits(5) with 2 held = %d, want 3", n)
	}
	if err := sem.AddPermits(ctx, -1); err != nil {
		t.Fatal(err)
	}
	if n, _ := sem.Drain(ctx); n != 2 {
		t.Fatalf("Drain = %d, want 2", n)
	}
	if _, err := sem.TryAcquire(ctx, 1, 0); !errors.Is(err, runtime.ErrNotAcquired) {
		t.Fatalf("acquire after Drain: %v", err)
	}
	if err := sem.Release(h); err != nil {
		t.Fatal(err)
	}
	if n, _ := rdb.Get(ctx, "ops").Int(); n != 2 {
		t.Fatalf("free count after release = %d, want 2", n)
	}
	if _, err := sem.TryAcquire(ctx, 0, 0); !errors.Is(err, runtime.ErrInvalidArgument) {
		t.Fatalf("acquire of 0 permits: %v", err)
	}
	if err := sem.Release(ctx); !errors.Is(err, runtime.ErrNotHeld) {
		t.Fatalf("Release without a hold: %v", err)
	}
}

func TestSemaphoreReleaseWakesAsManyWaitersAsPermitsCameFree(t *testing.T) {
	_, _, c := setup(t, nil)
	ctx := ctxT(t)
	sem := c.Semaphore("wake", runtime.SemaphoreOptions{Permits: 2})
	h, err := sem.Acquire(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan context.Context, 4)
	for i := 0; i < 4; i++ {
		go func() {
			w, err := sem.TryAcquire(ctx, 1, 10*time.Second)
			if err != nil {
				t.Error(err)
			}
			got <- w
		}()
	}
	time.Sleep(100 * time.Millisecond) // let them wait
	if err := sem.Release(h); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		select {
		case w := <-got:
			if w != nil {
				_ = sem.Release(w)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%d of 4 waiters got a permit", i)
		}
	}
}

func TestPlainSemaphoreUsesRSemaphoreLayout(t *testing.T) {
	_, rdb, c := setup(t, nil)
	ctx := ctxT(t)
	p := c.PlainSemaphore("plain", "Plain")
	if ok, err := p.TrySetPermits(ctx, 1); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if err := p.TryAcquire(ctx, 1, 0); err != nil {
		t.Fatal(err)
	}
	if typ, _ := rdb.Type(ctx, "plain").Result(); typ != "string" {
		t.Fatalf("type %s, want string", typ)
	}
	done := make(chan error, 1)
	go func() { done <- p.TryAcquire(ctx, 1, 5*time.Second) }()
	time.Sleep(50 * time.Millisecond)
	if err := p.Release(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("waiter not woken by the release: %v", err)
	}
	if n, _ := p.Available(ctx); n != 0 {
		t.Fatalf("Available = %d, want 0", n)
	}
}
