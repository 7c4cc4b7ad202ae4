package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/lua"
	"github.com/lockgen/lockgen/runtime"
)

// Shutdown lets running work finish: a new acquisition fails at once, a
// waiter stops waiting, a re-entry of the running hold still works, and
// Shutdown returns once the holder released.
func TestShutdownDrainsRunningHoldsAndRefusesNewOnes(t *testing.T) {
	_, _, c := setup(t, nil)
	ctx := ctxT(t)
	m := c.Mutex("drain:a", runtime.LockOptions{})
	hctx, err := m.TryLock(ctx, 0, runtime.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	waiter := make(chan error, 1)
	go func() {
		_, err := c.Mutex("drain:a", runtime.LockOptions{}).TryLock(ctx, 10*time.Second, runtime.Watchdog)
		waiter <- err
	}()
	time.Sleep(100 * time.Millisecond) // the waiter waits

	shut := make(chan error, 1)
	start := time.Now()
	go func() {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		shut <- c.Shutdown(sctx)
	}()
	select {
	case err := <-waiter:
		if !errors.Is(err, runtime.ErrDraining) {
			t.Fatalf("the waiter got %v, want ErrDraining", err)
		}
		if d := time.Since(start); d > 500*time.Millisecond {
			t.Errorf("the waiter stopped %v after Shutdown began", d)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the waiter was not stopped by Shutdown")
	}
	time.Sleep(20 * time.Millisecond)
	if _, err := c.Mutex("drain:b", runtime.LockOptions{}).TryLock(ctx, time.Second, runtime.Watchdog); !errors.Is(err, runtime.ErrDraining) {
		t.Fatalf("a new acquisition during Shutdown: %v, want ErrDraining", err)
	}
	// Running work may still take what it needs.
	inner, err := m.TryLock(hctx, 0, runtime.Watchdog)
	if err != nil {
		t.Fatalf("a re-entry of the running hold during Shutdown: %v", err)
	}
	nested, err := c.Mutex("drain:c", runtime.LockOptions{}).TryLock(hctx, 0, runtime.Watchdog)
	if err != nil {
		t.Fatalf("a nested lock of the running work during Shutdown: %v", err)
	}
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v while a hold was running", err)
	case <-time.After(200 * time.Millisecond):
	}
	for _, u := range []struct {
		m   *runtime.Mutex
		ctx context.Context
	}{{c.Mutex("drain:c", runtime.LockOptions{}), nested}, {m, inner}, {m, hctx}} {
		if err := u.m.Unlock(u.ctx); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-shut:
		if err != nil {
			t.Fatalf("Shutdown = %v after every hold ended on its own", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Shutdown did not return after the last hold was released")
	}
	if hctx.Err() == nil {
		t.Error("a released hold's ctx is not done")
	}
}

// Holds still running when Shutdown's ctx ends are cut: their ctx is
// cancelled with ErrDraining and their locks are given back in Redis at
// once, so another process does not wait out the lease.
func TestShutdownCutsWhatOutlivesItsCtxAndGivesItBack(t *testing.T) {
	_, rdb, other := setup(t, nil)
	c := newClient(t, rdb, &runtime.Options{WatchdogTimeout: 30 * time.Second})
	ctx := ctxT(t)
	held := map[string]context.Context{}
	for _, key := range []string{"cut:a", "cut:b"} {
		h, err := c.Mutex(key, runtime.LockOptions{}).TryLock(ctx, 0, runtime.Watchdog)
		if err != nil {
			t.Fatal(err)
		}
		held[key] = h
	}
	sem := c.Semaphore("cut:sem", runtime.SemaphoreOptions{Permits: 1})
	if _, err := sem.TryAcquire(ctx, 1, 0); err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := c.Shutdown(sctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown = %v, want its ctx's error", err)
	}
	t.Logf("Shutdown took %v", time.Since(start))
	for key, h := range held {
		if !errors.Is(context.Cause(h), runtime.ErrDraining) {
			t.Errorf("%s: the cut hold's cause is %v, want ErrDraining", key, context.Cause(h))
		}
		if _, err := other.Mutex(key, runtime.LockOptions{}).TryLock(ctx, 0, runtime.Watchdog); err != nil {
			t.Errorf("%s: another Client could not take the cut lock at once: %v", key, err)
		}
	}
	if _, err := other.Semaphore("cut:sem", runtime.SemaphoreOptions{Permits: 1}).TryAcquire(ctx, 1, 0); err != nil {
		t.Errorf("the cut permit was not given back: %v", err)
	}
}

// A RedLock hold still running when Shutdown's ctx ends is cut as every
// hold is: its ctx is done, with ErrDraining, before its parts are given
// back in Redis, so no other owner takes the lock while it runs (found by
// a review: the parts were cut and given back, and the RedLock hold's ctx
// stayed live). A fresh RedLock during the drain is refused with
// ErrDraining, as every fresh acquisition is, not with ErrQuorum.
func TestShutdownCutsARedLockHoldBeforeGivingItBack(t *testing.T) {
	nodes := startNodes(t, 3)
	c := newClient(t, nodes[0], &runtime.Options{RedLockNodes: nodes})
	other := newClient(t, nodes[0], &runtime.Options{RedLockNodes: nodes})
	ctx := ctxT(t)
	h, err := c.RedLock("red-cut", runtime.LockOptions{}).TryLock(ctx, 0, runtime.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	taken := make(chan context.Context, 1)
	go func() {
		oh, err := other.RedLock("red-cut", runtime.LockOptions{}).TryLock(ctx, 20*time.Second, runtime.Watchdog)
		if err != nil {
			t.Error(err)
		}
		taken <- oh
	}()
	sctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.Shutdown(sctx) }()
	probe := c.Mutex("probe", runtime.LockOptions{})
	eventually(t, 5*time.Second, "Shutdown draining", func() bool {
		ph, err := probe.TryLock(ctx, 0, runtime.Watchdog)
		if err == nil {
			_ = probe.Unlock(ph)
		}
		return errors.Is(err, runtime.ErrDraining)
	})
	if _, fresh := c.RedLock("red-fresh", runtime.LockOptions{}).TryLock(ctx, time.Second, runtime.Watchdog); !errors.Is(fresh, runtime.ErrDraining) {
		t.Errorf("a fresh RedLock during Shutdown: %v, want ErrDraining", fresh)
	}
	oh := <-taken
	if h.Err() == nil {
		t.Fatal("another Client holds the RedLock while the cut hold's ctx is live")
	}
	if !errors.Is(context.Cause(h), runtime.ErrDraining) {
		t.Errorf("the cut RedLock hold's cause is %v, want ErrDraining", context.Cause(h))
	}
	if err := <-done; !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown = %v, want its ctx's error", err)
	}
	if oh != nil {
		if err := other.RedLock("red-cut", runtime.LockOptions{}).Unlock(oh); err != nil {
			t.Error(err)
		}
	}
}

// Shutdown after Close, or racing it, returns once Close has ended the
// holds, and cuts nothing: their locks stay for their holders' Unlock,
// which still works (found by a review: Shutdown waited for its whole ctx,
// then marked the holds lost, so the holder's Unlock sent nothing and the
// lock stayed taken until its lease ran out).
func TestShutdownAfterCloseLeavesTheHoldsToTheirUnlock(t *testing.T) {
	_, rdb, c := setup(t, nil)
	ctx := ctxT(t)
	m := c.Mutex("closed-then-shutdown", runtime.LockOptions{})
	h, err := m.TryLock(ctx, 0, runtime.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown after Close: %v", err)
	}
	if err := m.Unlock(h); err != nil && !errors.Is(err, runtime.ErrClosed) {
		t.Fatalf("Unlock after Close and Shutdown: %v", err)
	}
	if n := rdb.Exists(ctx, "closed-then-shutdown").Val(); n != 0 {
		t.Fatal("the lock is still taken after its holder's Unlock")
	}
}

// A waiter that Shutdown ends leaves its fair lock's queue; when Redis
// refuses that for a while (a failover's READONLY), the leave is settled
// in the background, and Shutdown waits for it (up to ReleaseTimeout)
// before it closes the Client, which quit it: the queue kept a dead
// head, and the holder's release granted the lock to it for a lease
// (found by a cluster review, with a slot half moved: TRYAGAIN).
func TestShutdownWaitsForTheSettlementsUnderWay(t *testing.T) {
	s, rdb, a := setup(t, nil)
	ctx := ctxT(t)
	lua.FairLeave.Load(ctx, s.Client(t))
	var refuse atomic.Bool
	wrdb := s.Client(t)
	wrdb.AddHook(replyHook(func(cmd redis.Cmder) error {
		if refuse.Load() && isScriptCall(cmd.Args(), lua.FairLeave.Hash()) {
			return replyError("READONLY You can't write against a read only replica.")
		}
		return nil
	}))
	b := newClient(t, wrdb, nil)
	holder := a.FairLock("fair", runtime.LockOptions{})
	held, err := holder.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { _, err := b.FairLock("fair", runtime.LockOptions{}).Lock(ctx); got <- err }()
	eventually(t, 5*time.Second, "waiter queued", func() bool { return rdb.LLen(ctx, "redisson_lock_queue:{fair}").Val() == 1 })
	refuse.Store(true)
	time.AfterFunc(300*time.Millisecond, func() { refuse.Store(false) })
	if err := b.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; !errors.Is(err, runtime.ErrDraining) {
		t.Fatalf("waiter: %v, want ErrDraining", err)
	}
	if q := rdb.LRange(ctx, "redisson_lock_queue:{fair}", 0, -1).Val(); len(q) != 0 {
		t.Fatalf("queue %v after Shutdown returned, want the waiter gone", q)
	}
	if err := holder.Unlock(held); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Second, "no keys left", func() bool { return len(keysLeft(t, rdb)) == 0 })
}

// A RedLock waiter is drained as a Mutex's is: its pause between rounds
// did not watch Shutdown (it noticed at its next round, up to 500 ms
// later), and Shutdown did not wait for it, so Close overtook it and it
// ended with ErrClosed (found by a review).
func TestShutdownDrainsARedLockWaiter(t *testing.T) {
	ss := redistest.StartN(t, 3)
	ctx := ctxT(t)
	mk := func() *runtime.Client {
		var nodes []redis.UniversalClient
		for _, s := range ss {
			nodes = append(nodes, s.Client(t))
		}
		return newClient(t, ss[0].Client(t), &runtime.Options{RedLockNodes: nodes})
	}
	a, b := mk(), mk()
	held, err := a.RedLock("r", runtime.LockOptions{}).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { _, err := b.RedLock("r", runtime.LockOptions{}).Lock(ctx); got <- err }()
	eventually(t, 5*time.Second, "the waiter asleep on the nodes' channels", func() bool {
		n, _ := ss[0].Client(t).PubSubNumSub(ctx, "redisson_lock__channel:{r}").Result()
		return n["redisson_lock__channel:{r}"] > 0
	})
	start := time.Now()
	if err := b.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	select {
	case err := <-got:
		if !errors.Is(err, runtime.ErrDraining) {
			t.Fatalf("waiter: %v, want ErrDraining", err)
		}
	case <-time.After(time.Second): // it returns once its own call unwinds
		t.Fatal("the RedLock waiter Shutdown drained still waits")
	}
	t.Logf("Shutdown took %v", took)
	if err := a.RedLock("r", runtime.LockOptions{}).Unlock(held); err != nil {
		t.Fatal(err)
	}
}

// A multi-lock (not atomic) that holds its first members and waits for
// the next is a waiter to drain, not running work: it waited under the
// hold of its own first member, which Shutdown took for running work, so
// it neither drained it nor returned before its ctx ended (found by a
// review). Work under a multi-lock taken under running work still goes on.
func TestShutdownDrainsAMultiLockWaitingForItsNextMember(t *testing.T) {
	s, _, a := setup(t, nil)
	ctx := ctxT(t)
	b := newClient(t, s.Client(t), nil)
	held, err := a.Mutex("m2", runtime.LockOptions{}).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ml := b.MultiLock(runtime.LockOptions{}, b.FairLock("m1", runtime.LockOptions{}), b.Mutex("m2", runtime.LockOptions{}))
	if ml.Atomic() {
		t.Fatal("a fair lock and a mutex make an atomic multi-lock; the test needs one taken member by member")
	}
	got := make(chan error, 1)
	go func() { _, err := ml.Lock(ctx); got <- err }()
	eventually(t, 5*time.Second, "m1 held and the waiter asleep on m2", func() bool {
		return runtime.IdleWaiters(b.Mutex("m2", runtime.LockOptions{})) == 1
	})
	sctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := b.Shutdown(sctx); err != nil {
		t.Fatalf("Shutdown: %v, want nil (nothing held but by the waiter itself)", err)
	}
	select {
	case err := <-got:
		if !errors.Is(err, runtime.ErrDraining) {
			t.Fatalf("waiter: %v, want ErrDraining", err)
		}
	case <-time.After(time.Second): // it returns once it let its first member go
		t.Fatal("the multi-lock waiter Shutdown drained still waits")
	}
	if err := a.Mutex("m2", runtime.LockOptions{}).Unlock(held); err != nil {
		t.Fatal(err)
	}
}

// Shutdown waits for the late replies of calls their callers abandoned
// (a wait that gave up while Redis did not run its script: CLIENT PAUSE
// WRITE), and for the give-back of what they took: a soak's worker that
// ended with Close left a read hold its last cancelled wait took, until
// its lease ran out. It returned at once (no acquisition under way, the
// settler idle), and the give-back the late reply then queued came after
// Close, which dropped it.
func TestShutdownWaitsForTheLateRepliesOfAbandonedCalls(t *testing.T) {
	for _, kind := range []string{"reentrant", "semaphore"} {
		t.Run(kind, func(t *testing.T) {
			s := redistest.Start(t)
			admin := s.Client(t)
			ctx := ctxT(t)
			rdb := redis.NewClient(&redis.Options{Addr: s.Addr()}) // default options: the call runs aside
			t.Cleanup(func() { _ = rdb.Close() })
			c, err := runtime.NewClient(rdb, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			m := c.Mutex("late-shutdown", runtime.LockOptions{})
			sem := c.Semaphore("late-shutdown-sem", runtime.SemaphoreOptions{Permits: 1})
			// Warm the connection and the scripts first.
			if h, err := m.TryLock(ctx, 0, runtime.Watchdog); err != nil || m.Unlock(h) != nil {
				t.Fatal("warm-up:", err)
			}
			if h, err := sem.TryAcquire(ctx, 1, 0); err != nil || sem.Release(h) != nil {
				t.Fatal("warm-up:", err)
			}
			if err := admin.Do(ctx, "client", "pause", 500, "write").Err(); err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			if kind == "reentrant" {
				_, err = m.Lock(wctx)
			} else {
				_, err = sem.Acquire(wctx, 1)
			}
			cancel()
			if err == nil {
				t.Fatal("acquired on a paused server")
			}
			start := time.Now()
			if err := c.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			t.Logf("the wait: %v; Shutdown took %v", err, time.Since(start).Round(time.Millisecond))
			left := func() string {
				if admin.Exists(ctx, "late-shutdown").Val() != 0 {
					return "the lock"
				}
				if admin.ZCard(ctx, "{late-shutdown-sem}:timeout").Val() != 0 {
					return "a permit"
				}
				return ""
			}
			// What the late reply took (after the pause, 500 ms) is back
			// by the time Shutdown returned, or never: Close dropped it.
			time.Sleep(time.Until(start.Add(time.Second)))
			if what := left(); what != "" {
				t.Fatalf("%s taken by the abandoned wait is left after Shutdown returned", what)
			}
		})
	}
}

// A Shutdown whose Client's last hold ends just as a waiter of it is
// being given the lock (a woken waiter's try in flight, a hand-off or a
// grant being claimed) waits for the hold that waiter then has, or cuts
// it and gives it back, as it does the holds it saw. It found no hold,
// waited for the acquisition to return, and closed: the waiter's hold
// ended with ErrClosed and its lock stayed taken for a lease, renewed by
// no one (a holder that exits after Shutdown never releases it).
func TestShutdownWaitsForAHoldItsWaiterTakesAsTheLastEnds(t *testing.T) {
	s := redistest.Start(t)
	rdb := s.Client(t)
	ctx := ctxT(t)
	cases := []struct {
		name       string
		same, fair bool
		opts       *runtime.Options
	}{
		{"hand-off within a Client", true, false, nil},
		{"fair grant across Clients", false, true, nil},
		{"release without hand-off", true, false, &runtime.Options{NoHandoff: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for i := range 16 {
				key := fmt.Sprintf("shutdown-race-%s-%d", strings.ReplaceAll(tc.name, " ", "-"), i)
				a := newClient(t, rdb, tc.opts)
				b := a
				if !tc.same {
					b = newClient(t, rdb, tc.opts)
				}
				lock := func(c *runtime.Client) *runtime.Mutex {
					if tc.fair {
						return c.FairLock(key, runtime.LockOptions{})
					}
					return c.Mutex(key, runtime.LockOptions{})
				}
				la, lb := lock(a), lock(b)
				h, err := la.TryLock(ctx, 0, runtime.Watchdog)
				if err != nil {
					t.Fatal(err)
				}
				waited := make(chan struct{})
				go func() {
					defer close(waited)
					if hb, err := lb.TryLock(ctx, 20*time.Second, runtime.Watchdog); err == nil {
						<-hb.Done() // and exits without its Unlock
					}
				}()
				eventually(t, 5*time.Second, "the waiter waits", func() bool {
					if tc.fair {
						return rdb.LLen(ctx, "redisson_lock_queue:{"+key+"}").Val() > 0
					}
					return runtime.IdleWaiters(lb) > 0
				})
				delay := time.Duration(i%8) * 300 * time.Microsecond
				var wg sync.WaitGroup
				wg.Add(2)
				go func() {
					defer wg.Done()
					if i%2 == 0 {
						time.Sleep(delay)
					}
					if err := la.Unlock(h); err != nil {
						t.Errorf("unlock: %v", err)
					}
				}()
				go func() {
					defer wg.Done()
					if i%2 == 1 {
						time.Sleep(delay)
					}
					sctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
					defer cancel()
					_ = b.Shutdown(sctx)
				}()
				wg.Wait()
				<-waited
				if !tc.same {
					_ = a.Close()
				}
				if n := rdb.Exists(ctx, key).Val(); n != 0 {
					t.Fatalf("round %d: the lock is still taken after Shutdown returned (pttl %v)", i, rdb.PTTL(ctx, key).Val())
				}
			}
		})
	}
}
