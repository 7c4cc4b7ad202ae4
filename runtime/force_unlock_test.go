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

// scriptDelayHook delays one script by d: its send (Redis runs it after
// the caller went on), or with late its reply (Redis has run it before
// the client reads the reply), as a slow network would.
type scriptDelayHook struct {
	sha  string
	d    time.Duration
	late bool
}

func (scriptDelayHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (scriptDelayHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h scriptDelayHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !isScriptCall(cmd.Args(), h.sha) {
			return next(ctx, cmd)
		}
		if !h.late {
			time.Sleep(h.d)
		}
		err := next(ctx, cmd)
		if h.late {
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
	rdb.AddHook(scriptDelayHook{sha: lua.ForceUnlock.Hash(), d: 500 * time.Millisecond, late: true})
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

// A ForceUnlock that Redis refused (a master demoted: READONLY) ended the
// local holds all the same; what they had in Redis is given back once it
// answers, not left until the lease ran out, renewed by no one.
func TestAForceUnlockRefusedGivesBackTheHoldsItEnded(t *testing.T) {
	s := redistest.Start(t)
	admin, ctx := s.Client(t), ctxT(t)
	c := newClient(t, s.Client(t), &runtime.Options{ReleaseTimeout: 300 * time.Millisecond})
	const key = "force-unlock-refused"
	m := c.Mutex(key, runtime.LockOptions{})
	h, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.Do(ctx, "REPLICAOF", "127.0.0.1", "1").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := m.ForceUnlock(ctx); err == nil {
		t.Fatal("ForceUnlock succeeded on a replica")
	}
	if !errors.Is(context.Cause(h), runtime.ErrLockLost) {
		t.Fatalf("the hold's cause %v, want ErrLockLost: its ctx ends first whatever Redis answers", context.Cause(h))
	}
	if err := admin.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the lock given back once Redis answers", func() bool { return admin.Exists(ctx, key).Val() == 0 })
}

// A hold this Client takes while its ForceUnlock is on its way (after the
// local holds ended, before Redis runs the delete) is deleted by it: its
// ctx ends once the force's reply comes, before another Client can take
// the lock after that reply.
func TestAHoldTakenWhileAForceUnlockIsOnItsWayEndsWithIt(t *testing.T) {
	s := redistest.Start(t)
	ctx := ctxT(t)
	rdb := s.Client(t)
	rdb.AddHook(scriptDelayHook{sha: lua.ForceUnlock.Hash(), d: 300 * time.Millisecond})
	c := newClient(t, rdb, nil)
	other := newClient(t, s.Client(t), nil)
	const key = "force-unlock-in-flight"
	m := c.Mutex(key, runtime.LockOptions{})
	if _, err := m.ForceUnlock(ctx); err != nil { // the script is loaded
		t.Fatal(err)
	}
	forced := make(chan error, 1)
	go func() {
		_, err := m.ForceUnlock(ctx)
		forced <- err
	}()
	time.Sleep(100 * time.Millisecond) // the force is on its way
	h, err := m.TryLock(ctx, 0, runtime.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-forced; err != nil {
		t.Fatal(err)
	}
	o := other.Mutex(key, runtime.LockOptions{})
	h2, err := o.TryLock(ctx, 0, runtime.Watchdog)
	if err != nil {
		t.Fatalf("the force deleted the lock, yet another Client cannot take it: %v", err)
	}
	defer func() { _ = o.Unlock(h2) }()
	if h.Err() == nil {
		t.Fatal("another Client took the lock while a hold of this Client, taken during the force and deleted by it, still runs")
	}
	_ = m.Unlock(h) // the hold ended with the force: its Unlock reports the loss
}
