package runtime_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/lua"
	"github.com/lockgen/lockgen/runtime"
)

// midTryHook runs during, once armed, the first fair acquire it sees:
// after Redis ran it and before its reply is returned to the caller.
type midTryHook struct {
	during atomic.Pointer[func()]
}

func (h *midTryHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *midTryHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *midTryHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if isScriptCall(cmd.Args(), lua.FairAcquire.Hash()) {
			if f := h.during.Swap(nil); f != nil {
				(*f)()
			}
		}
		return err
	}
}

// A release that grants the lock to a waiter whose try is on its way
// back (the try re-registered the waiter with its nonce, then the release
// ran, and its "2:<nonce>" reached the hub before the try's reply): the
// grant is for that try, so the waiter, its try failed, claims it when it
// goes to sleep, and holds the lock with no further call.
func TestFairGrantMessageArrivingMidTryIsClaimed(t *testing.T) {
	s, rdb, a := setup(t, nil)
	plain := s.Client(t)
	ctx := ctxT(t)
	for _, sc := range []*redis.Script{lua.FairAcquire, lua.FairRelease} {
		sc.Load(ctx, plain)
	}
	h := &midTryHook{}
	wrdb := s.Client(t)
	wrdb.AddHook(h)
	b := newClient(t, wrdb, nil)

	holder := a.FairLock("fair", runtime.LockOptions{})
	held, err := holder.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m := b.FairLock("fair", runtime.LockOptions{})
	got := queuedFairWaiter(t, rdb, m.Lock)
	waiter := rdb.LIndex(ctx, "redisson_lock_queue:{fair}", 0).Val()
	released := make(chan struct{})
	during := func() {
		defer close(released)
		if err := holder.Unlock(held); err != nil {
			t.Error(err)
		}
		// The grant's message reaches the waiter's hub before the
		// try's reply reaches the waiter.
		time.Sleep(100 * time.Millisecond)
	}
	h.during.Store(&during)
	evals := commandCalls(t, plain, "evalsha")
	// Wake the waiter to try again while the lock is still held.
	if err := plain.Publish(ctx, "redisson_lock__channel:{fair}:"+waiter, "0").Err(); err != nil {
		t.Fatal(err)
	}
	<-released
	hctx := <-got
	if hctx == nil {
		t.FailNow()
	}
	if f := plain.HGet(ctx, "fair", waiter).Val(); f != "1" {
		t.Fatalf("lock field of the waiter %q, want 1", f)
	}
	// The waiter's try and the holder's release: the grant was claimed
	// without a try of its own.
	if n := commandCalls(t, plain, "evalsha") - evals; n != 2 {
		t.Errorf("%d script calls, want 2 (the try, the release)", n)
	}
	if err := m.Unlock(hctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Second, "no keys left", func() bool { return len(keysLeft(t, rdb)) == 0 })
}
