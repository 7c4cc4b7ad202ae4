package runtime_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/lockgen/lockgen/runtime"
)

// multiShapes are the two ways a multi-lock takes its members: one script
// (reentrant members on one server or slot) and one by one in key order
// (here forced by a fair member).
var multiShapes = []struct {
	name   string
	atomic bool
	second func(c *runtime.Client, key string) *runtime.Mutex
}{
	{"atomic", true, func(c *runtime.Client, key string) *runtime.Mutex { return c.Mutex(key, runtime.LockOptions{}) }},
	{"in order", false, func(c *runtime.Client, key string) *runtime.Mutex { return c.FairLock(key, runtime.LockOptions{}) }},
}

func TestMultiLocksInOppositeOrdersNeverDeadlock(t *testing.T) {
	t.Parallel() // servers of its own; it checks counts and order, not times
	for _, shape := range multiShapes {
		t.Run(shape.name, func(t *testing.T) {
			_, rdb, c := setup(t, nil)
			ctx := ctxT(t)
			a, b := c.Mutex("A", runtime.LockOptions{}), shape.second(c, "B")
			opts := runtime.LockOptions{WaitTime: runtime.Forever}
			ab, ba := c.MultiLock(opts, a, b), c.MultiLock(opts, b, a)
			if ab.Atomic() != shape.atomic {
				t.Fatalf("Atomic() = %v", ab.Atomic())
			}
			var inside sync.Mutex
			var wg sync.WaitGroup
			for _, l := range []*runtime.MultiLock{ab, ba} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < 500; i++ {
						err := l.Do(ctx, func(context.Context) error {
							if !inside.TryLock() {
								t.Error("two multi-locks inside at once")
							} else {
								inside.Unlock()
							}
							return nil
						})
						if err != nil {
							t.Error(err)
							return
						}
					}
				}()
			}
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(60 * time.Second):
				t.Fatal("deadlock: [A,B] and [B,A] did not finish")
			}
			if left := keysLeft(t, rdb); len(left) != 0 {
				t.Fatalf("keys left: %v", left)
			}
		})
	}
}

func TestMultiLockInOneSlotCostsOneRoundTrip(t *testing.T) {
	e, cc := setupCounted(t, nil)
	ctx := ctxT(t)
	c := e.c
	l := c.MultiLock(runtime.LockOptions{}, c.Mutex("report:{acme}:a", runtime.LockOptions{}),
		c.Mutex("report:{acme}:b", runtime.LockOptions{}), c.Mutex("report:{acme}:c", runtime.LockOptions{}))
	_ = l.Do(ctx, func(context.Context) error { return nil }) // warm the script cache
	cc.start()
	err := l.Do(ctx, func(ctx context.Context) error {
		if n := cc.n.Load(); n != 1 {
			t.Errorf("acquiring 3 same-slot members sent %d commands, want 1", n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := cc.n.Load(); n != 2 {
		t.Fatalf("acquire + release sent %d commands, want 2", n)
	}
}

func TestMultiLockIsAllOrNothing(t *testing.T) {
	// A server of its own per shape; its bound (2 s) is far from a
	// loaded machine's delays.
	t.Parallel()
	for _, shape := range multiShapes {
		t.Run(shape.name, func(t *testing.T) {
			t.Parallel()
			_, rdb, c := setup(t, nil)
			ctx := ctxT(t)
			b := shape.second(c, "B")
			hb, err := b.Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			l := c.MultiLock(runtime.LockOptions{}, c.Mutex("A", runtime.LockOptions{}), b)
			if _, err := l.TryLock(ctx, 200*time.Millisecond, runtime.Watchdog); !errors.Is(err, runtime.ErrNotAcquired) {
				t.Fatalf("with B held elsewhere: %v, want ErrNotAcquired", err)
			}
			if rdb.Exists(ctx, "A").Val() != 0 {
				t.Fatal("A left taken by a failed multi-lock")
			}
			// Once B is free the multi-lock gets both, woken by B's release.
			got := make(chan error, 1)
			go func() {
				h, err := l.TryLock(ctx, 10*time.Second, runtime.Watchdog)
				if err == nil {
					err = l.Unlock(h)
				}
				got <- err
			}()
			time.Sleep(100 * time.Millisecond)
			_ = b.Unlock(hb)
			select {
			case err := <-got:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(2 * time.Second):
				t.Fatal("multi-lock not woken by the member's release")
			}
		})
	}
}

func TestMultiLockLosingOneMemberCancelsTheHold(t *testing.T) {
	// A server of its own per shape; its bound (2 s) is far from a
	// loaded machine's delays.
	t.Parallel()
	for _, shape := range multiShapes {
		t.Run(shape.name, func(t *testing.T) {
			t.Parallel()
			_, rdb, c := setup(t, &runtime.Options{WatchdogTimeout: 600 * time.Millisecond})
			ctx := ctxT(t)
			l := c.MultiLock(runtime.LockOptions{}, c.Mutex("A", runtime.LockOptions{}), shape.second(c, "B"))
			err := l.Do(ctx, func(ctx context.Context) error {
				rdb.Del(ctx, "A")
				select {
				case <-ctx.Done():
					return context.Cause(ctx)
				case <-time.After(2 * time.Second):
					return errors.New("not cancelled")
				}
			})
			if !errors.Is(err, runtime.ErrLockLost) {
				t.Fatalf("Do = %v, want ErrLockLost", err)
			}
			if left := keysLeft(t, rdb); len(left) != 0 {
				t.Fatalf("keys left: %v", left)
			}
		})
	}
}

// A member taken one by one that is lost while the next members are
// waited for ends the acquisition with the loss, not only with the
// cancellation of the ctx the next member was waited for under: the
// caller cancelled nothing.
func TestMultiLockMemberLostWhileTheNextIsWaitedForReportsTheLoss(t *testing.T) {
	t.Parallel()
	_, rdb, c := setup(t, &runtime.Options{WatchdogTimeout: 600 * time.Millisecond})
	ctx := ctxT(t)
	other := newClient(t, rdb, nil)
	b := other.FairLock("B", runtime.LockOptions{})
	hb, err := b.TryLock(ctx, 0, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Unlock(hb) }()
	l := c.MultiLock(runtime.LockOptions{}, c.Mutex("A", runtime.LockOptions{}), c.FairLock("B", runtime.LockOptions{}))
	got := make(chan error, 1)
	go func() {
		h, err := l.TryLock(ctx, 5*time.Second, runtime.Watchdog)
		if err == nil {
			_ = l.Unlock(h)
		}
		got <- err
	}()
	eventually(t, 5*time.Second, "A taken", func() bool { return rdb.Exists(ctx, "A").Val() == 1 })
	rdb.Del(ctx, "A") // lost: the next renewal finds its field gone
	select {
	case err = <-got:
	case <-time.After(4 * time.Second):
		t.Fatal("the multi-lock went on waiting for B after A was lost")
	}
	if !errors.Is(err, runtime.ErrLockLost) {
		t.Fatalf("TryLock = %v, want ErrLockLost (A was lost), not only a cancellation", err)
	}
}

// A multi-lock's Unlock given the ctx of a hold of one member alone (not
// the multi-lock's) refuses with ErrNotHeld and releases nothing, in both
// shapes: taken one by one, it released that member before refusing the
// others, ending the member's hold and freeing its key.
func TestMultiLockUnlockWithOneMembersHoldReleasesNothing(t *testing.T) {
	for _, shape := range multiShapes {
		t.Run(shape.name, func(t *testing.T) {
			_, rdb, c := setup(t, nil)
			ctx := ctxT(t)
			o := runtime.LockOptions{}
			a := c.Mutex("{mm}a", o)
			ml := c.MultiLock(o, c.Mutex("{mm}a", o), shape.second(c, "{mm}b"))
			if ml.Atomic() != shape.atomic {
				t.Fatalf("Atomic() = %v", ml.Atomic())
			}
			h, err := a.TryLock(ctx, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := ml.Unlock(h); !errors.Is(err, runtime.ErrNotHeld) {
				t.Errorf("MultiLock.Unlock(a member's hold) = %v, want ErrNotHeld", err)
			}
			if h.Err() != nil {
				t.Fatalf("the member's own hold ended: %v", context.Cause(h))
			}
			if ok, _ := a.IsLocked(ctx); !ok {
				t.Fatal("the member was released by a multi-lock that never held it")
			}
			if err := a.Unlock(h); err != nil {
				t.Fatalf("the member's own Unlock: %v", err)
			}
			if left := keysLeft(t, rdb); len(left) > 0 {
				t.Errorf("keys left: %v", left)
			}
		})
	}
}
