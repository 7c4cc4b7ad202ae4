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

func TestMutexUncontendedAcquireReleaseCostsTwoCommands(t *testing.T) {
	e, cc := setupCounted(t, nil)
	ctx := ctxT(t)
	m := e.c.Mutex("order:1", runtime.LockOptions{Name: "OrderLock"})
	// Warm up: load the scripts so EVALSHA hits.
	if err := m.Do(ctx, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	cc.start()
	for i := 0; i < 10; i++ {
		if err := m.Do(ctx, func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if got := cc.n.Load(); got != 20 {
		t.Fatalf("10 uncontended Do calls sent %d commands, want 20 (one acquire, one release each)", got)
	}
}

// It keeps both cores busy, so it runs before the parallel tests (which
// wait far more than they compute), its kinds at once, each on a server of
// its own.
func TestLocksExcludeGoroutines(t *testing.T) {
	skipShortOutsideCI(t)
	t.Parallel() // no time bound: only exclusion and the counter are checked
	forEachKind(t, exclusiveKinds, func(t *testing.T, k lockKind) {
		t.Parallel()
		testExcludesGoroutines(t, k)
	})
}

func testExcludesGoroutines(t *testing.T, k lockKind) {
	_, rdb, c := setup(t, nil)
	// No time bound is checked, only exclusion and the counter: the ctx
	// is a harness limit, which 3,200 contended sections on a cluster at
	// load 14 (6 ms each on a quiet box) overran at ctxT's minute.
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	// 64 goroutines contend for every hand-off, so each of the 3,200
	// critical sections per kind is a contended one; the count itself
	// is arbitrary (it was 200: 6-10 s per kind under -race, 8-10 s on
	// a cluster).
	const workers, rounds = 64, 50
	m := k.new(c, "counter-lock", runtime.LockOptions{Name: "Counter", WaitTime: runtime.Forever})
	var rec intervals
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				err := m.Do(ctx, func(ctx context.Context) error {
					start := time.Now()
					// Non-atomic read-modify-write: only the lock keeps it correct.
					v, err := rdb.Get(ctx, "counter").Int()
					if err != nil && err.Error() != "redis: nil" {
						return err
					}
					if err := rdb.Set(ctx, "counter", v+1, 0).Err(); err != nil {
						return err
					}
					rec.add(start, time.Now())
					return nil
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got, _ := rdb.Get(ctx, "counter").Int(); got != workers*rounds {
		t.Fatalf("counter = %d, want %d: lost updates", got, workers*rounds)
	}
	if n := rec.overlaps(); n != 0 {
		t.Fatalf("%d overlapping critical sections", n)
	}
	if n, _ := rdb.Exists(ctx, "counter-lock").Result(); n != 0 {
		t.Fatalf("lock key left behind")
	}
}

// intervals records critical sections and counts overlaps.
type intervals struct {
	mu sync.Mutex
	iv [][2]int64
}

func (r *intervals) add(start, end time.Time) {
	r.mu.Lock()
	r.iv = append(r.iv, [2]int64{start.UnixNano(), end.UnixNano()})
	r.mu.Unlock()
}

func (r *intervals) overlaps() int { return countOverlaps(r.iv) }

func countOverlaps(iv [][2]int64) int {
	sorted := append([][2]int64(nil), iv...)
	sortIntervals(sorted)
	n := 0
	for i := 1; i < len(sorted); i++ {
		if sorted[i][0] < sorted[i-1][1] {
			n++
		}
	}
	return n
}

func TestLocksReenterThroughHoldContext(t *testing.T) {
	forEachKind(t, exclusiveKinds, testReenters)
}

func testReenters(t *testing.T, k lockKind) {
	_, rdb, c := setup(t, nil)
	ctx := ctxT(t)
	m := k.new(c, "reentrant", runtime.LockOptions{})
	h1, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h2, err := m.TryLock(h1, 0, runtime.Watchdog)
	if err != nil {
		t.Fatalf("re-entry with the hold's ctx: %v", err)
	}
	h3, err := k.new(c, "reentrant", runtime.LockOptions{}).TryLock(context.WithValue(h2, struct{}{}, 1), 0, runtime.Watchdog)
	if err != nil {
		t.Fatalf("re-entry with a derived ctx and another handle: %v", err)
	}
	vals, _ := rdb.HGetAll(ctx, "reentrant").Result()
	counts := 0
	for f, v := range vals {
		if f == "mode" {
			continue
		}
		counts++
		if v != "3" {
			t.Fatalf("hold count in redis = %s, want 3", v)
		}
	}
	if counts != 1 {
		t.Fatalf("hash = %v, want one owner field", vals)
	}
	if n, _ := m.HoldCount(h3); n != 3 {
		t.Fatalf("HoldCount = %d, want 3", n)
	}
	// A fresh ctx is another owner: it must not get in.
	if _, err := m.TryLock(ctx, 0, runtime.Watchdog); !errors.Is(err, runtime.ErrNotAcquired) {
		t.Fatalf("other owner: err = %v, want ErrNotAcquired", err)
	}
	for i, h := range []context.Context{h3, h2} {
		if err := m.Unlock(h); err != nil {
			t.Fatal(err)
		}
		if locked, _ := m.IsLocked(ctx); !locked {
			t.Fatalf("lock released after inner release %d", i+1)
		}
	}
	if n, _ := m.HoldCount(h1); n != 1 {
		t.Fatalf("HoldCount = %d, want 1", n)
	}
	if err := m.Unlock(h1); err != nil {
		t.Fatal(err)
	}
	if locked, _ := m.IsLocked(ctx); locked {
		t.Fatal("still locked after the outermost release")
	}
	if h1.Err() == nil {
		t.Fatal("hold ctx not cancelled after release")
	}
}

func TestMutexUnlockTwiceReturnsNotHeldAndDecrementsOnce(t *testing.T) {
	_, _, c := setup(t, nil)
	ctx := ctxT(t)
	m := c.Mutex("twice", runtime.LockOptions{})
	h1, _ := m.Lock(ctx)
	h2, err := m.Lock(h1)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Unlock(h2); err != nil {
		t.Fatal(err)
	}
	if err := m.Unlock(h2); !errors.Is(err, runtime.ErrNotHeld) {
		t.Fatalf("second Unlock: %v, want ErrNotHeld", err)
	}
	if n, _ := m.HoldCount(h1); n != 1 {
		t.Fatalf("hold count %d after double unlock of inner hold, want 1", n)
	}
	_ = m.Unlock(h1)
}

func TestLocksRefuseUnlockByNonOwner(t *testing.T) {
	forEachKind(t, append(exclusiveKinds, readKind), testNonOwnerUnlock)
}

func testNonOwnerUnlock(t *testing.T, k lockKind) {
	_, _, c := setup(t, nil)
	ctx := ctxT(t)
	m := k.new(c, "owned", runtime.LockOptions{})
	h, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	err = m.Unlock(ctx)
	var le *runtime.LockError
	if !errors.Is(err, runtime.ErrNotHeld) || !errors.As(err, &le) || le.Key != "owned" {
		t.Fatalf("Unlock by non-owner: %v, want ErrNotHeld naming the key", err)
	}
	// Another lock's hold ctx does not own this one either.
	other, _ := c.Mutex("other", runtime.LockOptions{}).Lock(ctx)
	if err := m.Unlock(other); !errors.Is(err, runtime.ErrNotHeld) {
		t.Fatalf("Unlock with another lock's ctx: %v", err)
	}
	if locked, _ := m.IsLocked(ctx); !locked {
		t.Fatal("non-owner unlock released the lock")
	}
	if err := m.Unlock(h); err != nil {
		t.Fatal(err)
	}
}

func TestMutexUnlockWithCancelledContextStillReleases(t *testing.T) {
	_, _, c := setup(t, nil)
	m := c.Mutex("cancelled-release", runtime.LockOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	h, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := m.Unlock(h); err != nil {
		t.Fatalf("Unlock after cancel: %v", err)
	}
	if locked, _ := m.IsLocked(context.Background()); locked {
		t.Fatal("lock leaked after release with a cancelled ctx")
	}
}

func TestMutexBadInputIsATypedError(t *testing.T) {
	_, _, c := setup(t, nil)
	ctx := ctxT(t)
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"empty key", c.Mutex("", runtime.LockOptions{}).Do(ctx, func(context.Context) error { return nil }), runtime.ErrInvalidKey},
		{"nil fn", c.Mutex("k", runtime.LockOptions{}).Do(ctx, nil), runtime.ErrInvalidArgument},
		{"negative lease", c.Mutex("k", runtime.LockOptions{Lease: -time.Second}).Do(ctx, func(context.Context) error { return nil }), runtime.ErrInvalidLease},
		{"unlock of nothing", c.Mutex("k", runtime.LockOptions{}).Unlock(ctx), runtime.ErrNotHeld},
	}
	for _, tc := range cases {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, tc.err, tc.want)
		}
	}
	if _, err := runtime.NewClient(nil, nil); !errors.Is(err, runtime.ErrInvalidArgument) {
		t.Errorf("NewClient(nil): %v", err)
	}
	_ = c.Close()
	err := c.Mutex("k", runtime.LockOptions{}).Do(ctx, func(context.Context) error { return nil })
	if !errors.Is(err, runtime.ErrClosed) {
		t.Errorf("use after Close: %v, want ErrClosed", err)
	}
	if n, _ := c.Mutex("k", runtime.LockOptions{}).IsLocked(ctx); n {
		t.Error("bad input left a lock behind")
	}
}

func TestMutexDoReleasesWhenFnPanics(t *testing.T) {
	_, _, c := setup(t, nil)
	ctx := ctxT(t)
	m := c.Mutex("panicky", runtime.LockOptions{})
	func() {
		defer func() { _ = recover() }()
		_ = m.Do(ctx, func(context.Context) error { panic("boom") })
	}()
	if locked, _ := m.IsLocked(ctx); locked {
		t.Fatal("lock left held after a panic in fn")
	}
}

func TestMutexWaitTimeZeroTriesOnce(t *testing.T) {
	_, _, c := setup(t, nil)
	ctx := ctxT(t)
	m := c.Mutex("busy", runtime.LockOptions{})
	h, _ := m.Lock(ctx)
	defer m.Unlock(h)
	start := time.Now()
	err := m.Do(ctx, func(context.Context) error { return nil })
	if !errors.Is(err, runtime.ErrNotAcquired) {
		t.Fatalf("err = %v, want ErrNotAcquired", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("a single try took %v", d)
	}
	// A bounded wait gives up with ErrNotAcquired too.
	_, err = m.TryLock(ctx, 100*time.Millisecond, runtime.Watchdog)
	if !errors.Is(err, runtime.ErrNotAcquired) {
		t.Fatalf("bounded wait: %v", err)
	}
}

// A hold is of one lock: its key, kind and fencing. The ctx of a hold
// given to a handle of another kind on the same key (a Mutex and a
// FairLock, a FencedLock or the sides of a read-write lock) neither
// releases that hold nor re-enters it. Their scripts count the same hash
// field differently (a read hold has a timeout key per count, a fair hold
// wakes its queue on channels of its own), so such an Unlock ended the
// hold and left the key locked, and a re-entry mixed the counts; a write
// under a Mutex hold was refused as an upgrade from a read hold that was
// not there. Only the read-write lock's own pair is allowed: the
// writer's read hold (a downgrade); the reader's write is ErrUpgrade.
func TestLocksRefuseAHoldOfAnotherKindOnTheSameKey(t *testing.T) {
	_, rdb, c := setup(t, nil)
	ctx := ctxT(t)
	o := runtime.LockOptions{}
	kinds := []struct {
		name string
		new  func(key string) *runtime.Mutex
	}{
		{"reentrant", func(key string) *runtime.Mutex { return c.Mutex(key, o) }},
		{"fair", func(key string) *runtime.Mutex { return c.FairLock(key, o) }},
		{"fenced", func(key string) *runtime.Mutex { return c.FencedLock(key, o).Mutex }},
		{"read", func(key string) *runtime.Mutex { return c.ReadWrite(key, o).Read() }},
		{"write", func(key string) *runtime.Mutex { return c.ReadWrite(key, o).Write() }},
	}
	for _, a := range kinds {
		for _, b := range kinds {
			if a.name == b.name || a.name == "write" && b.name == "read" {
				continue // a re-entry; a downgrade
			}
			t.Run(a.name+" held, "+b.name+" handle", func(t *testing.T) {
				key := "xk-" + a.name + "-" + b.name
				h, err := a.new(key).TryLock(ctx, 0, 0)
				if err != nil {
					t.Fatal(err)
				}
				if err := b.new(key).Unlock(h); !errors.Is(err, runtime.ErrNotHeld) {
					t.Errorf("%s.Unlock(%s hold) = %v, want ErrNotHeld", b.name, a.name, err)
				}
				want := runtime.ErrInvalidArgument
				if a.name == "read" && b.name == "write" {
					want = runtime.ErrUpgrade
				}
				if h2, err := b.new(key).TryLock(h, 0, 0); !errors.Is(err, want) {
					t.Errorf("%s.TryLock(%s hold) = %v, want %v", b.name, a.name, err, want)
					if err == nil {
						_ = b.new(key).Unlock(h2)
					}
				}
				if h.Err() != nil {
					t.Fatalf("the %s hold ended: %v", a.name, context.Cause(h))
				}
				if n, err := a.new(key).HoldCount(h); n != 1 || err != nil {
					t.Errorf("the %s hold's count = %d, %v, want 1", a.name, n, err)
				}
				if err := a.new(key).Unlock(h); err != nil {
					t.Fatalf("the %s hold's own Unlock: %v", a.name, err)
				}
				for _, k := range keysLeft(t, rdb) {
					if (k == key || strings.Contains(k, "{"+key+"}")) && k != "redisson_lock_token:{"+key+"}" {
						t.Errorf("%s left after every hold was released: %v", k, rdb.HGetAll(ctx, k).Val())
					}
				}
			})
		}
	}
}
