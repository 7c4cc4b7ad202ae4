package runtime_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/runtime"
)

func TestWaiterWakesOnUnlockNotOnTTL(t *testing.T) {
	forEachKind(t, exclusiveKinds, testWakesOnUnlock)
}

func testWakesOnUnlock(t *testing.T, k lockKind) {
	_, rdb, c := setup(t, nil)
	ctx := ctxT(t)
	holder := k.new(c, "wake-"+k.name, runtime.LockOptions{Lease: 10 * time.Second})
	h, err := holder.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	acquired := make(chan time.Time, 1)
	go func() {
		m := k.new(c, "wake-"+k.name, runtime.LockOptions{})
		w, err := m.TryLock(ctx, 20*time.Second, runtime.Watchdog)
		if err != nil {
			t.Error(err)
			return
		}
		acquired <- time.Now()
		_ = m.Unlock(w)
	}()
	// Let the waiter subscribe and go to sleep.
	eventually(t, 5*time.Second, "waiter subscribed", func() bool { return waitersOn(t, rdb, "wake-"+k.name) == 1 })
	time.Sleep(100 * time.Millisecond)
	if ttl, _ := rdb.PTTL(ctx, "wake-"+k.name).Result(); ttl < 9*time.Second {
		t.Fatalf("holder TTL %v, want ~10s", ttl)
	}
	released := time.Now()
	if err := holder.Unlock(h); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-acquired:
		// Within a bound far under the holder's 10 s TTL, which a waiter
		// that missed the message sleeps toward; how fast a hand-off is
		// is bench/'s to measure (a loaded box stalls a test process
		// longer than a 50 ms bound here once allowed).
		if d := at.Sub(released); d > 2*time.Second {
			t.Fatalf("waiter acquired %v after the release, want within 2s", d)
		} else {
			t.Logf("hand-off took %v", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiter slept toward the TTL instead of waking on the unlock message")
	}
}

func TestUnlockWakesOneWaiterPerMessage(t *testing.T) {
	e, cc := setupCounted(t, nil)
	ctx := ctxT(t)
	m := e.c.Mutex("herd", runtime.LockOptions{})
	h, _ := m.Lock(ctx)
	const waiters = 16
	var wg sync.WaitGroup
	cc.start()
	for i := 0; i < waiters; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w, err := m.TryLock(ctx, 20*time.Second, runtime.Watchdog)
			if err != nil {
				t.Error(err)
				return
			}
			time.Sleep(20 * time.Millisecond)
			_ = m.Unlock(w)
		}()
	}
	// All asleep: each has tried, and no command went out for 200 ms.
	// (A 300 ms sleep stood for this; in a full run beside other work,
	// load 5, waiters still making their first tries were counted.)
	for last := int64(-1); ; {
		time.Sleep(200 * time.Millisecond)
		n := cc.n.Load()
		if n == last && n >= waiters {
			break
		}
		last = n
	}
	asleep := cc.n.Load()
	_ = m.Unlock(h)
	wg.Wait()
	// Each hand-off: the woken waiter's acquire and its release. A herd
	// would add a failed acquire per waiter per unlock (~16*16/2).
	if n := cc.n.Load() - asleep; n > 3*waiters {
		t.Fatalf("%d commands for %d hand-offs: waiters are woken in herds", n, waiters)
	} else {
		t.Logf("%d commands for %d hand-offs", n, waiters)
	}
}

func TestCancelledWaiterReturnsCtxErrorAndLeavesNothing(t *testing.T) {
	forEachKind(t, exclusiveKinds, testCancelledWaiter)
}

func testCancelledWaiter(t *testing.T, k lockKind) {
	_, rdb, c := setup(t, nil)
	defer verifyNoLeak(t, goleak.IgnoreCurrent())
	ctx := ctxT(t)
	m := k.new(c, "cancel-"+k.name, runtime.LockOptions{})
	h, _ := m.Lock(ctx)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := m.Lock(wctx)
		done <- err
	}()
	eventually(t, 5*time.Second, "waiter subscribed", func() bool { return waitersOn(t, rdb, "cancel-"+k.name) == 1 })
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	case <-time.After(time.Second):
		t.Fatal("cancelled waiter did not return")
	}
	eventually(t, 2*time.Second, "subscription dropped", func() bool { return waitersOn(t, rdb, "cancel-"+k.name) == 0 })
	// A deadline while waiting is the ctx's error too.
	dctx, dcancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer dcancel()
	if _, err := m.Lock(dctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("deadline: %v", err)
	}
	_ = m.Unlock(h)
	// A waiter that gave up leaves its queue within 15 ms, or in the
	// background when Redis is slower than that (package mutex, leave): a
	// release sent meanwhile grants the lock to it (or keeps its queue
	// record), and its leave gives that back. Under load a check made at
	// once found them ("keys left behind: [cancel-fair
	// lockgen_fair_grants:{cancel-fair}]" with a leave slowed to 100 ms).
	// So what is left must go before it expires: a waiter that never left
	// is seen by keys that stay until their TTL runs out.
	gone := time.Now().Add(5 * time.Second) // for keys without a TTL
	for _, k := range keysLeft(t, rdb) {
		if ttl := rdb.PTTL(ctx, k).Val(); ttl > 0 {
			gone = minTime(gone, time.Now().Add(ttl-100*time.Millisecond))
		}
	}
	eventually(t, time.Until(gone), "no keys left behind before they expire", func() bool { return len(keysLeft(t, rdb)) == 0 })
	_ = c.Close()
}

func TestScriptFlushMidRunIsSurvived(t *testing.T) {
	skipShortOutsideCI(t)
	// A lease of 1.5 s, so that only NOSCRIPT, not a loaded box's stall,
	// can lose the hold: at 600 ms (renewals 200 ms apart, each two round
	// trips after the flush) a 400 ms stall would, as it should.
	t.Parallel()
	const timeout = 1500 * time.Millisecond
	_, rdb, c := setup(t, &runtime.Options{WatchdogTimeout: timeout})
	ctx := ctxT(t)
	m := c.Mutex("flushed", runtime.LockOptions{})
	h, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * timeout) // watchdog renews through NOSCRIPT
	if h.Err() != nil {
		t.Fatalf("hold lost after SCRIPT FLUSH: %v", context.Cause(h))
	}
	rdb.ScriptFlush(ctx)
	h2, err := m.TryLock(h, 0, runtime.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	rdb.ScriptFlush(ctx)
	if err := m.Unlock(h2); err != nil {
		t.Fatal(err)
	}
	rdb.ScriptFlush(ctx)
	if err := m.Unlock(h); err != nil {
		t.Fatal(err)
	}
	if locked, _ := m.IsLocked(ctx); locked {
		t.Fatal("still locked")
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// A newcomer that skips its first try behind this Client's own waiter,
// while Redis answers nothing for its whole wait, reports ErrUnavailable,
// as a newcomer of another Client does in the same outage: no answer came
// within the call, so "someone held it" would be a guess (design §7). A
// waiter ahead of it in line may never have had an answer either.
func TestASkippedTryDuringAnOutageIsUnavailable(t *testing.T) {
	s := redistest.Start(t)
	admin := s.Client(t)
	c, other := newClient(t, s.Client(t), nil), newClient(t, s.Client(t), nil)
	ctx := ctxT(t)
	const key = "outage-skip"
	if _, err := newClient(t, admin, nil).Mutex(key, runtime.LockOptions{}).TryLock(ctx, 0, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Mutex(key, runtime.LockOptions{}).TryLock(ctx, 0, runtime.Watchdog); !errors.Is(err, runtime.ErrNotAcquired) {
		t.Fatalf("the other Client's first try: %v", err) // its connection is open
	}
	m := c.Mutex(key, runtime.LockOptions{})
	bg, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _, _ = m.TryLock(bg, 30*time.Second, runtime.Watchdog) }()
	eventually(t, 5*time.Second, "the first waiter subscribed", func() bool { return waitersOn(t, admin, key) == 1 })
	time.Sleep(50 * time.Millisecond)

	paused := make(chan struct{})
	go func() { s.Pause(1500 * time.Millisecond); close(paused) }()
	defer func() { <-paused }()
	time.Sleep(30 * time.Millisecond)
	elsewhere := make(chan error, 1)
	go func() {
		_, err := other.Mutex(key, runtime.LockOptions{}).TryLock(ctx, 300*time.Millisecond, runtime.Watchdog)
		elsewhere <- err
	}()
	_, err := m.TryLock(ctx, 300*time.Millisecond, runtime.Watchdog)
	if err := <-elsewhere; !errors.Is(err, runtime.ErrUnavailable) {
		t.Errorf("TryLock(300ms) of another Client, Redis paused throughout: %v, want ErrUnavailable", err)
	}
	if !errors.Is(err, runtime.ErrUnavailable) || errors.Is(err, runtime.ErrNotAcquired) {
		t.Errorf("TryLock(300ms) behind a local waiter, Redis paused throughout: %v, want ErrUnavailable", err)
	}
}
