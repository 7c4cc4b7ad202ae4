package runtime_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockgen/lockgen/runtime"
)

// recorder keeps the events an Observer is told.
type recorder struct {
	mu     sync.Mutex
	events []runtime.Event
}

func (r *recorder) ObserveLock(e runtime.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e.Ctx = nil // not kept past the call
	r.events = append(r.events, e)
}

func (r *recorder) of(name string, kind runtime.EventKind) []runtime.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []runtime.Event
	for _, e := range r.events {
		if e.Name == name && e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

func TestObserverSeesAWaitOnceAndPairsReleaseWithAcquisition(t *testing.T) {
	rec := &recorder{}
	_, _, c := setup(t, &runtime.Options{Observer: rec})
	ctx := ctxT(t)
	m := c.FairLock("obs:1", runtime.LockOptions{Name: "InventoryLock", WaitTime: 5 * time.Second})
	first, err := m.TryLock(ctx, 0, runtime.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		hctx, err := m.TryLock(ctx, 5*time.Second, runtime.Watchdog)
		if err == nil {
			time.Sleep(20 * time.Millisecond)
			err = m.Unlock(hctx)
		}
		got <- err
	}()
	eventually(t, 5*time.Second, "the second acquisition starts waiting", func() bool {
		return len(rec.of("InventoryLock", runtime.EventWaitStarted)) == 1
	})
	time.Sleep(50 * time.Millisecond)
	if err := m.Unlock(first); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	acq := rec.of("InventoryLock", runtime.EventAcquired)
	rel := rec.of("InventoryLock", runtime.EventReleased)
	if len(acq) != 2 || len(rel) != 2 || len(rec.of("InventoryLock", runtime.EventWaitStarted)) != 1 {
		t.Fatalf("events %+v, want 2 acquired, 2 released, 1 wait-started", rec.events)
	}
	for _, e := range append(acq, rel...) {
		if e.Lock != "fair" || e.Key != "obs:1" || !strings.HasPrefix(e.Owner, c.ID()+":") {
			t.Fatalf("event %+v: want lock fair, key obs:1, an owner of this client", e)
		}
	}
	if acq[1].Owner != rel[1].Owner || acq[0].Owner != rel[0].Owner {
		t.Fatalf("releases %q %q do not pair with acquisitions %q %q", rel[0].Owner, rel[1].Owner, acq[0].Owner, acq[1].Owner)
	}
	if acq[1].Wait < 50*time.Millisecond || rel[1].Held < 20*time.Millisecond {
		t.Fatalf("waiter waited %v and held %v, want ≥ 50ms and ≥ 20ms", acq[1].Wait, rel[1].Held)
	}
}

func TestObserverTellsFailuresByCauseAndTheKindOfEachLock(t *testing.T) {
	rec := &recorder{}
	_, _, c := setup(t, &runtime.Options{Observer: rec})
	ctx := ctxT(t)
	rw := c.ReadWrite("obs:rw", runtime.LockOptions{Name: "Catalog"})
	w, err := rw.Write().TryLock(ctx, 0, runtime.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rw.Read().TryLock(ctx, 0, runtime.Watchdog); !errors.Is(err, runtime.ErrNotAcquired) {
		t.Fatalf("read while written: %v", err)
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	if _, err := rw.Read().TryLock(cctx, runtime.Forever, runtime.Watchdog); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("read until ctx done: %v", err)
	}
	_ = rw.Write().Unlock(w)
	fails := rec.of("Catalog", runtime.EventAcquireFailed)
	if len(fails) != 2 || !errors.Is(fails[0].Err, runtime.ErrNotAcquired) || !errors.Is(fails[1].Err, context.DeadlineExceeded) {
		t.Fatalf("failures %+v, want not acquired then ctx done", fails)
	}
	if fails[0].Lock != "read" || rec.of("Catalog", runtime.EventAcquired)[0].Lock != "write" {
		t.Fatalf("kinds %q / %q, want read / write", fails[0].Lock, rec.of("Catalog", runtime.EventAcquired)[0].Lock)
	}
	if n := len(rec.of("Catalog", runtime.EventWaitStarted)); n != 1 {
		t.Fatalf("%d wait-started events, want 1 (the try-once read does not wait)", n)
	}

	a, b := c.Mutex("obs:a", runtime.LockOptions{Name: "A"}), c.Mutex("obs:b", runtime.LockOptions{Name: "B"})
	ml := c.MultiLock(runtime.LockOptions{Name: "Checkout"}, a, b)
	if err := ml.Do(ctx, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if got := rec.of("Checkout", runtime.EventAcquired); len(got) != 1 || got[0].Lock != "multi" || got[0].Owner == "" {
		t.Fatalf("multi acquired events %+v", got)
	}
	if got := rec.of("Checkout", runtime.EventReleased); len(got) != 1 || got[0].Lock != "multi" {
		t.Fatalf("multi released events %+v", got)
	}
}

// A release that finds its hold gone (ErrLockLost, before the lease clock
// saw the loss) reports the loss, for a Semaphore as for a Mutex: a
// Semaphore's Release returned before reporting any end on an error, and
// its loss was never reported either (the release took the hold off the
// lease clock), so the acquisition stayed open for good (found as the
// flake of TestObserverEndsEveryAcquisitionOnceUnderChurn under load).
func TestAReleaseThatFindsItsHoldGoneReportsTheLoss(t *testing.T) {
	for _, kind := range []string{"mutex", "semaphore"} {
		t.Run(kind, func(t *testing.T) {
			rec := &recorder{}
			_, rdb, c := setup(t, &runtime.Options{Observer: rec})
			ctx := ctxT(t)
			var release func() error
			switch kind {
			case "mutex":
				m := c.Mutex("bk", runtime.LockOptions{Name: "N"})
				h, err := m.Lock(ctx)
				if err != nil {
					t.Fatal(err)
				}
				release = func() error { return m.Unlock(h) }
			case "semaphore":
				sem := c.Semaphore("bk", runtime.SemaphoreOptions{Permits: 1, Name: "N"})
				h, err := sem.Acquire(ctx, 1)
				if err != nil {
					t.Fatal(err)
				}
				release = func() error { return sem.Release(h) }
			}
			// Gone from Redis before the lease clock could notice (its
			// watchdog renews every 10 s): the release is what finds it.
			rdb.Del(ctx, "bk", "{bk}:timeout")
			if err := release(); !errors.Is(err, runtime.ErrLockLost) {
				t.Fatalf("release: %v, want ErrLockLost", err)
			}
			acq, ends := len(rec.of("N", runtime.EventAcquired)), len(rec.of("N", runtime.EventLost))+len(rec.of("N", runtime.EventReleased))
			if acq != 1 || ends != 1 {
				t.Fatalf("%d acquisitions, %d ends reported; want 1 and 1", acq, ends)
			}
		})
	}
}
