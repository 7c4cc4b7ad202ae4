package runtime_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/lua"
	"github.com/lockgen/lockgen/runtime"
)

// lateReplyHook delays the reply of one script by d, as a slow network
// would: Redis has run it before the client reads its reply.
type lateReplyHook struct {
	sha string
	d   time.Duration
}

func (lateReplyHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (lateReplyHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h lateReplyHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if isScriptCall(cmd.Args(), h.sha) {
			time.Sleep(h.d)
		}
		return err
	}
}

// A ForceUnlock ends the local holds of its key before it deletes the
// lock: a waiter of the same Client, woken by the force-unlock's message,
// must not take the lock while a hold's ctx still runs (the deadline
// invariant). It ended them after the reply, 500 ms late here.
func TestForceUnlockEndsTheLocalHoldsBeforeTheLockIsFree(t *testing.T) {
	s := redistest.Start(t)
	rdb := s.Client(t)
	rdb.AddHook(lateReplyHook{sha: lua.ForceUnlock.Hash(), d: 500 * time.Millisecond})
	c := newClient(t, rdb, nil)
	ctx := ctxT(t)
	const key = "force-unlock-local"
	m := c.Mutex(key, runtime.LockOptions{})
	held, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		h            context.Context
		err          error
		heldWasEnded bool
	}
	got := make(chan result, 1)
	go func() {
		h, err := c.Mutex(key, runtime.LockOptions{}).TryLock(ctx, 5*time.Second, runtime.Watchdog)
		got <- result{h, err, held.Err() != nil}
	}()
	eventually(t, 2*time.Second, "the waiter waits", func() bool { return runtime.IdleWaiters(m) > 0 })
	forced := make(chan error, 1)
	go func() {
		_, err := m.ForceUnlock(ctx)
		forced <- err
	}()
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer func() { _ = m.Unlock(r.h) }()
	if !r.heldWasEnded {
		t.Fatal("a second owner took the lock while the first hold's ctx still ran")
	}
	if err := <-forced; err != nil {
		t.Fatal(err)
	}
	if !errors.Is(context.Cause(held), runtime.ErrLockLost) {
		t.Fatalf("the force-unlocked hold's cause %v, want ErrLockLost", context.Cause(held))
	}
}
