package runtime_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/runtime"
)

// An Observer pairs an end with its acquisition (Key, Owner, Lock): under
// churn of every kind, with leases that run out about when their holders
// unlock, every acquisition ends exactly once, released or lost, after it
// was reported. The acquisition was reported after the hold went on the
// lease clock, which could report its loss first (a span or gauge an
// Observer opened for it never ended); an Unlock that found the key gone
// (the lease clock's timer not yet run on a busy box) reported no end; an
// atomic multi-lock's loss came before its acquisition or not at all.
func TestObserverEndsEveryAcquisitionOnceUnderChurn(t *testing.T) {
	skipShortOutsideCI(t)
	t.Parallel() // checks the events' order and count, no time
	rec := &recorder{}
	var nodes []redis.UniversalClient
	for range 3 {
		nodes = append(nodes, redistest.Start(t).Client(t))
	}
	e := newEnv(t, &runtime.Options{Observer: rec, RedLockNodes: nodes, WatchdogTimeout: 600 * time.Millisecond})
	c, ctx := e.c, ctxT(t)
	type taker func(lease time.Duration) (context.Context, func(context.Context) error, error)
	lock := func(l interface {
		TryLock(context.Context, time.Duration, time.Duration) (context.Context, error)
		Unlock(context.Context) error
	}) taker {
		return func(lease time.Duration) (context.Context, func(context.Context) error, error) {
			h, err := l.TryLock(ctx, 200*time.Millisecond, lease)
			return h, l.Unlock, err
		}
	}
	rw := c.ReadWrite("churn:rw", runtime.LockOptions{Name: "RW"})
	sem := c.Semaphore("churn:sem", runtime.SemaphoreOptions{Permits: 2, Name: "Sem"})
	fenced := c.FencedLock("churn:fen", runtime.LockOptions{Name: "Fen"})
	kinds := []taker{
		lock(c.Mutex("churn:m", runtime.LockOptions{Name: "M"})),
		lock(c.FairLock("churn:f", runtime.LockOptions{Name: "F"})),
		lock(c.MultiLock(runtime.LockOptions{Name: "AM"}, c.Mutex("churn:a1", runtime.LockOptions{}), c.Mutex("churn:a2", runtime.LockOptions{}))),
		lock(c.MultiLock(runtime.LockOptions{Name: "OM"}, c.Mutex("churn:o1", runtime.LockOptions{}), c.FairLock("churn:o2", runtime.LockOptions{}))),
		lock(c.RedLock("churn:red", runtime.LockOptions{Name: "Red"})),
		lock(fenced),
		func(time.Duration) (context.Context, func(context.Context) error, error) {
			h, err := sem.TryAcquire(ctx, 1, 200*time.Millisecond)
			return h, sem.Release, err
		},
		func(lease time.Duration) (context.Context, func(context.Context) error, error) { // a downgrade
			w, err := rw.Write().TryLock(ctx, 200*time.Millisecond, lease)
			if err != nil {
				return nil, nil, err
			}
			r, err := rw.Read().TryLock(w, 0, lease)
			_ = rw.Write().Unlock(w)
			return r, rw.Read().Unlock, err
		},
	}
	var wg sync.WaitGroup
	stop := time.Now().Add(3 * time.Second)
	for _, take := range kinds {
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(stop) {
					lease := time.Duration(20+rand.IntN(40)) * time.Millisecond
					if rand.IntN(3) == 0 {
						lease = runtime.Watchdog
					}
					if h, unlock, err := take(lease); err == nil {
						time.Sleep(time.Duration(rand.IntN(60)) * time.Millisecond)
						_ = unlock(h)
					}
				}
			}()
		}
	}
	wg.Wait()
	time.Sleep(time.Second) // losses reported from the lease clock's goroutine
	rec.mu.Lock()
	defer rec.mu.Unlock()
	open := map[string]bool{}
	for _, ev := range rec.events {
		id := ev.Name + "|" + ev.Key + "|" + ev.Owner + "|" + ev.Lock
		switch ev.Kind {
		case runtime.EventAcquired:
			open[id] = true
		case runtime.EventLost, runtime.EventReleased:
			if !open[id] {
				t.Errorf("%v of %s reported with no acquisition open (%v)", ev.Kind, id, ev.Err)
			}
			delete(open, id)
		}
	}
	if len(open) > 0 {
		t.Errorf("%d acquisitions never reported released or lost: %v", len(open), open)
	}
}

// A multi-lock and a RedLock are reported as themselves: one EventLost of
// Lock "multi" or "red" when the hold is lost (an atomic multi-lock's
// members, never reported acquired, are not reported lost), and no
// EventReleased from an Unlock that released nothing (ErrNotHeld) or
// found the hold lost (reported when it happened).
func TestObserverReportsCompositeLocksAsThemselves(t *testing.T) {
	for _, atomic := range []bool{true, false} {
		name := map[bool]string{true: "atomic multi", false: "multi in order"}[atomic]
		t.Run(name, func(t *testing.T) {
			rec := &recorder{}
			e := newEnv(t, &runtime.Options{Observer: rec})
			ctx := ctxT(t)
			a := e.c.Mutex("obs:a", runtime.LockOptions{})
			b := e.c.Mutex("obs:b", runtime.LockOptions{})
			if !atomic {
				b = e.c.FairLock("obs:b", runtime.LockOptions{})
			}
			l := e.c.MultiLock(runtime.LockOptions{Name: "Both"}, a, b)
			if l.Atomic() != atomic {
				t.Fatalf("Atomic() = %v", l.Atomic())
			}
			h, err := l.TryLock(ctx, 0, runtime.Watchdog)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Unlock(h); err != nil {
				t.Fatal(err)
			}
			if err := l.Unlock(h); !errors.Is(err, runtime.ErrNotHeld) {
				t.Fatalf("second Unlock: %v, want ErrNotHeld", err)
			}
			h, err = l.TryLock(ctx, 0, 300*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			<-h.Done()
			// Lost, or released: the ctx ends a drift before Redis lets
			// the keys go. Its end is reported once either way, as a loss.
			if err := l.Unlock(h); err != nil && !errors.Is(err, runtime.ErrLockLost) {
				t.Fatalf("Unlock after the lease ran out: %v, want nil or ErrLockLost", err)
			}
			eventually(t, 2*time.Second, "the multi-lock's loss is reported", func() bool { return len(rec.of("Both", runtime.EventLost)) > 0 })
			time.Sleep(50 * time.Millisecond) // a second report would come now
			acquired, released, lost := rec.of("Both", runtime.EventAcquired), rec.of("Both", runtime.EventReleased), rec.of("Both", runtime.EventLost)
			if len(acquired) != 2 || len(released) != 1 || len(lost) != 1 {
				t.Fatalf("multi-lock events: %d acquired, %d released, %d lost; want 2, 1, 1", len(acquired), len(released), len(lost))
			}
			if l := lost[0]; l.Lock != "multi" || l.Key != "obs:a,obs:b" || l.Owner != acquired[1].Owner || !errors.Is(l.Err, runtime.ErrLockLost) {
				t.Fatalf("loss reported as %+v, want the multi-lock's second acquisition", l)
			}
			if members := rec.of("", runtime.EventLost); atomic && len(members) != 0 {
				t.Fatalf("the atomic multi-lock's members reported lost on their own: %+v", members)
			}
		})
	}
	t.Run("red", func(t *testing.T) {
		rec := &recorder{}
		var nodes []redis.UniversalClient
		for range 3 {
			nodes = append(nodes, redistest.Start(t).Client(t))
		}
		c := newClient(t, nodes[0], &runtime.Options{RedLockNodes: nodes, Observer: rec, WatchdogTimeout: 600 * time.Millisecond})
		ctx := ctxT(t)
		l := c.RedLock("obs:red", runtime.LockOptions{Name: "Red"})
		h, err := l.TryLock(ctx, 0, runtime.Watchdog)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes[:2] {
			n.Del(ctx, "obs:red")
		}
		select {
		case <-h.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("the RedLock hold was not found lost")
		}
		if err := l.Unlock(h); !errors.Is(err, runtime.ErrLockLost) {
			t.Fatalf("Unlock after the loss: %v, want ErrLockLost", err)
		}
		eventually(t, 2*time.Second, "the RedLock's loss is reported", func() bool { return len(rec.of("Red", runtime.EventLost)) > 0 })
		if lost, released := rec.of("Red", runtime.EventLost), rec.of("Red", runtime.EventReleased); len(lost) != 1 || lost[0].Lock != "red" || len(released) != 0 {
			t.Fatalf("RedLock events: lost %+v, %d released; want one loss of Lock red and no release", lost, len(released))
		}
		_ = context.Cause(h)
	})
}
