package runtime_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime"
)

// A waiter whose owner other goroutines act for (its ctx holds another
// lock, and goroutines sharing that ctx share the owner) is never handed a
// lock: the hand-off is an acquire for that owner sent outside the owner's
// turn, so a sibling's call in between (here a TryLock that finds the
// owner's field and counts it as its own, then an Unlock that frees the
// lock) would leave the waiter told it holds a lock someone else has.
func TestLocalHandoffNeverGrantsAnOwnerOtherGoroutinesShare(t *testing.T) {
	ran, proceed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	h := &handoffHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		err := next(ctx, cmd)
		first := false
		once.Do(func() { close(ran); first = true })
		if first {
			<-proceed // the reply is slow: the grant is made, the waiter not told
		}
		return err
	}}
	rdb, c, _ := handoffSetup(t, h)
	ctx := ctxT(t)
	outer := c.Mutex("outer", runtime.LockOptions{})
	inner := c.Mutex("inner", runtime.LockOptions{})
	octx, err := outer.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	xctx, err := inner.Lock(ctx) // another owner holds inner
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		hctx context.Context
		err  error
	}
	got := make(chan result, 1)
	go func() { // a goroutine of outer's owner waits for inner
		hctx, err := inner.Lock(octx)
		got <- result{hctx, err}
	}()
	eventually(t, 5*time.Second, "waiter asleep", func() bool { return runtime.IdleWaiters(inner) == 1 })
	h.on.Store(true)
	unlocked := make(chan error, 1)
	go func() { unlocked <- inner.Unlock(xctx) }()
	select {
	case <-ran: // handed on: the reply is held back
	case err := <-unlocked: // released as usual
		unlocked <- err
	}
	// Another goroutine of the same owner tries inner meanwhile, and lets
	// it go again; a third party takes it if it is free.
	if sctx, err := inner.TryLock(octx, 0, runtime.Watchdog); err == nil {
		if err := inner.Unlock(sctx); err != nil {
			t.Fatal(err)
		}
	}
	yctx, yerr := inner.TryLock(ctx, 0, 2*time.Second)
	close(proceed)
	if err := <-unlocked; err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("Lock = %v", r.err)
	}
	if n, err := inner.HoldCount(r.hctx); err != nil || n < 1 {
		t.Fatalf("the waiter's Lock returned with its owner holding inner %d times in Redis (%v): %v holds it", n, err, rdb.HGetAll(ctx, "inner").Val())
	}
	if err := inner.Unlock(r.hctx); err != nil {
		t.Fatal(err)
	}
	if yerr == nil {
		_ = inner.Unlock(yctx)
	}
	if err := outer.Unlock(octx); err != nil {
		t.Fatal(err)
	}
	if keys := keysLeft(t, rdb); len(keys) != 0 {
		t.Fatalf("keys left: %v", keys)
	}
}
