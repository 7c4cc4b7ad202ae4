package runtime_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/runtime"
)

// EventWaitStarted comes once per wait: a goroutine that skipped its try
// (behind its Client's own waiter) reported its wait as started, so a
// later try that fails, after a wake-up (here the replaced pub/sub
// connection's), must not report it again.
func TestSkippedTryWaiterReportsItsWaitStartedOnce(t *testing.T) {
	s := redistest.Start(t)
	admin := s.Client(t)
	ctx := ctxT(t)
	var started atomic.Int32
	c := newClient(t, s.Client(t), &runtime.Options{Observer: runtime.ObserverFunc(func(e runtime.Event) {
		if e.Kind == runtime.EventWaitStarted {
			started.Add(1)
		}
	})})
	m := c.Mutex("skip:observed", runtime.LockOptions{})
	held, got := heldWithOneWaiter(t, m)
	second := make(chan context.Context, 1)
	go func() {
		hctx, err := m.Lock(ctx)
		if err != nil {
			t.Error(err)
		}
		second <- hctx
	}()
	eventually(t, 5*time.Second, "newcomer parked", func() bool { return parkedOf(m) == 2 })
	// Every waiter wakes on the new connection's subscription and tries:
	// the lock is still held.
	evals := commandCalls(t, admin, "evalsha")
	if err := admin.ClientKillByFilter(ctx, "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "both waiters tried again", func() bool { return commandCalls(t, admin, "evalsha")-evals >= 2 })
	eventually(t, 10*time.Second, "both waiters parked again", func() bool { return parkedOf(m) == 2 })
	if err := m.Unlock(held); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []chan context.Context{got, second} {
		hctx := <-ch
		if hctx == nil {
			t.FailNow()
		}
		if err := m.Unlock(hctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := started.Load(); n != 2 {
		t.Fatalf("%d EventWaitStarted for 2 waits", n)
	}
}
