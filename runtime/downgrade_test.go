package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/lockgen/lockgen/runtime"
)

// A downgrade (a read hold taken by the writer) and the hold ctxs around
// it, and the checks a multi-lock shares with its members. Each test's
// comment tells what went wrong before its fix.

// A downgrade whose read hold is re-entered: W, then R1 under W (the
// downgrade), then R2 under R1 (a read re-entry). The write release keeps
// both read holds (one field, count 2), and TestDowngradedReadHold-
// OutlivesTheWriteRelease's contract says the write release does not end
// them. R1's ctx follows what W was taken under (ctx); R2's follows what
// R1 was taken under, which is W's hold ctx: W's Unlock ends R2's ctx
// while its hold is still counted in Redis and in the registry.
func TestReenteredDowngradeOutlivesTheWriteRelease(t *testing.T) {
	_, rdb, c := setup(t, nil)
	ctx := ctxT(t)
	rw := c.ReadWrite("downgrade3", runtime.LockOptions{})
	w, err := rw.Write().Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r1, err := rw.Read().TryLock(w, 0, runtime.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := rw.Read().TryLock(r1, 0, runtime.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	if err := rw.Write().Unlock(w); err != nil {
		t.Fatal(err)
	}
	if mode := rdb.HGet(ctx, "downgrade3", "mode").Val(); mode != "read" {
		t.Fatalf("after the write release: mode %q; want the read holds kept", mode)
	}
	if r1.Err() != nil {
		t.Errorf("R1 (taken under the write hold) is kept, yet its ctx is done: %v", context.Cause(r1))
	}
	if r2.Err() != nil {
		t.Errorf("R2 (a re-entry of the downgraded read hold) is kept, yet the write release ended its ctx: %v", context.Cause(r2))
	}
	if err := rw.Read().Unlock(r2); err != nil {
		t.Errorf("unlock R2: %v", err)
	}
	if err := rw.Read().Unlock(r1); err != nil {
		t.Errorf("unlock R1: %v", err)
	}
}

// The same with a re-entered write hold: W1, W2 under W1 (a write
// re-entry), R under W2 (the downgrade). Releasing W2 then W1 leaves R,
// yet R follows what W2 was taken under: W1's hold ctx, which W1's Unlock
// ends.
func TestDowngradeUnderAReenteredWriteHoldOutlivesTheWriteRelease(t *testing.T) {
	_, rdb, c := setup(t, nil)
	ctx := ctxT(t)
	rw := c.ReadWrite("downgrade3w", runtime.LockOptions{})
	w1, err := rw.Write().Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w2, err := rw.Write().Lock(w1)
	if err != nil {
		t.Fatal(err)
	}
	r, err := rw.Read().TryLock(w2, 0, runtime.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rw.Read().Unlock(r) }()
	if err := rw.Write().Unlock(w2); err != nil {
		t.Fatal(err)
	}
	if r.Err() != nil {
		t.Fatalf("after the inner write release R's ctx is done: %v", context.Cause(r))
	}
	if err := rw.Write().Unlock(w1); err != nil {
		t.Fatal(err)
	}
	if mode := rdb.HGet(ctx, "downgrade3w", "mode").Val(); mode != "read" {
		t.Fatalf("after the write releases: mode %q; want the read hold kept", mode)
	}
	if r.Err() != nil {
		t.Errorf("the downgraded read hold is kept, yet the outer write release ended its ctx: %v", context.Cause(r))
	}
}

// A re-entry taken under the caller's own deadline keeps it: before the
// change the nested hold's ctx was a child of the outer hold's, so
// Deadline() reported the caller's deadline and, once it passed, Err() was
// context.DeadlineExceeded. Now the nested ctx is built on
// context.WithoutCancel (which drops the deadline) and only cancelled by
// an AfterFunc: no Deadline(), and Err() is context.Canceled when the
// caller's deadline passes (code that sets I/O deadlines from ctx, or
// tells a timeout from a cancellation, no longer sees it).
func TestReentryKeepsTheCallersDeadline(t *testing.T) {
	_, _, c := setup(t, nil)
	base, cancel := context.WithTimeout(ctxT(t), 400*time.Millisecond)
	defer cancel()
	want, _ := base.Deadline()
	m := c.Mutex("reentry-deadline", runtime.LockOptions{})
	h1, err := m.Lock(base)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = m.Unlock(h1) }()
	h2, err := m.Lock(h1)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = m.Unlock(h2) }()
	if d, ok := h1.Deadline(); !ok || d.After(want) {
		t.Fatalf("outer hold: Deadline() = %v, %v; want at most %v", d, ok, want)
	}
	if d, ok := h2.Deadline(); !ok || d.After(want) {
		t.Errorf("re-entry: Deadline() = %v, %v; want at most the caller's %v", d, ok, want)
	}
	select {
	case <-h2.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the re-entry's ctx did not end with the caller's deadline")
	}
	if !errors.Is(h1.Err(), context.DeadlineExceeded) {
		t.Fatalf("outer hold: Err() = %v", h1.Err())
	}
	if !errors.Is(h2.Err(), context.DeadlineExceeded) {
		t.Errorf("re-entry: Err() = %v (cause %v) once the caller's deadline passed; want context.DeadlineExceeded", h2.Err(), context.Cause(h2))
	}
}

// A downgrade's read hold ends with the write hold when that one is lost:
// the two are fields of one hash, and the write field is gone only when
// the hash went (deleted, FLUSHALL, expired), taking the read field with
// it. The watchdog found the write hold gone and ended it; the read hold
// (a fixed lease, which nothing renews) used to end with it, as a child
// of its ctx; now it follows only what the write hold was taken under,
// and stays live while another Client holds the write lock.
func TestDowngradedReadHoldEndsWhenTheWriteHoldIsFoundGone(t *testing.T) {
	_, rdb, c := setup(t, &runtime.Options{WatchdogTimeout: 600 * time.Millisecond})
	other := newClient(t, rdb, nil)
	ctx := ctxT(t)
	o := runtime.LockOptions{}
	rw := c.ReadWrite("downgrade-gone", o)
	w, err := rw.Write().Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r, err := rw.Read().TryLock(w, 0, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rw.Read().Unlock(r) }()
	defer func() { _ = rw.Write().Unlock(w) }()
	// The hash and the read hold's timeout key go, as in a FLUSHALL.
	keys := rdb.Keys(ctx, "*downgrade-gone*").Val()
	if n := rdb.Del(ctx, keys...).Val(); n < 2 {
		t.Fatalf("deleted %d of %v", n, keys)
	}
	select {
	case <-w.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the write hold was not found gone")
	}
	ow, err := other.ReadWrite("downgrade-gone", o).Write().TryLock(ctx, 0, runtime.Watchdog)
	if err != nil {
		t.Fatalf("another Client's write lock: %v", err)
	}
	defer func() { _ = other.ReadWrite("downgrade-gone", o).Write().Unlock(ow) }()
	// The read hold follows the write hold's loss through an AfterFunc: it
	// ends a goroutine wake-up after it, not in the same cancel, so it may
	// still be live when the other Client's try returns (a deleted hash
	// is outside the deadline invariant: the loss is only found at a
	// renewal). It must end then, not at its own 20 s lease.
	select {
	case <-r.Done():
	case <-time.After(2 * time.Second):
		t.Fatalf("another Client holds the write lock, yet the read hold's ctx (whose hash went with the lost write hold: %v) is live", context.Cause(w))
	}
	if !errors.Is(context.Cause(r), runtime.ErrLockLost) {
		t.Errorf("the read hold ended with %v, want its write hold's loss (ErrLockLost)", context.Cause(r))
	}
}

// TryLock refuses a fair lock whose QueueTimeout is under 10 ms
// (TestFairLockTinyQueueTimeoutIsRefusedOrWakesItsWaiters), but a
// multi-lock takes its members through Mutex.acquireAs, past that check:
// the same member in a multi-lock is neither refused nor woken.
func TestMultiLockOverAFairLockWithATinyQueueTimeoutIsRefusedOrWakesItsWaiters(t *testing.T) {
	_, rdb, c := setup(t, nil)
	other := newClient(t, rdb, nil)
	ctx := ctxT(t)
	tiny := runtime.LockOptions{QueueTimeout: 2} // 2 ns
	const key = "fair-tiny-queue-multi"
	if _, err := other.FairLock(key, tiny).TryLock(ctx, 0, runtime.Watchdog); !errors.Is(err, runtime.ErrInvalidArgument) {
		t.Fatalf("the fair lock alone: %v, want ErrInvalidArgument", err)
	}
	h, err := c.FairLock(key, runtime.LockOptions{}).TryLock(ctx, 0, runtime.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	got := make(chan error, 2)
	for i := range 2 {
		ml := other.MultiLock(runtime.LockOptions{}, other.FairLock(key, tiny), other.Mutex(fmt.Sprintf("tiny-member-%d", i), runtime.LockOptions{}))
		hh, err := ml.TryLock(ctx, 0, runtime.Watchdog)
		if errors.Is(err, runtime.ErrInvalidArgument) {
			_ = c.FairLock(key, runtime.LockOptions{}).Unlock(h)
			return // refused: fine
		}
		if err == nil {
			_ = ml.Unlock(hh)
			t.Fatalf("multi-lock %d took a held fair lock", i)
		}
		go func() {
			hh, err := ml.TryLock(wctx, runtime.Forever, runtime.Watchdog)
			if err == nil {
				err = ml.Unlock(hh)
			}
			got <- err
		}()
	}
	eventually(t, 5*time.Second, "both waiters asleep on their channels", func() bool {
		return waitersOn(t, rdb, key) == 2
	})
	if err := c.FairLock(key, runtime.LockOptions{}).Unlock(h); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := <-got; err != nil {
			t.Fatalf("waiter %d of 2 (the lock was released and free): %v; lock key exists: %d", i+1, err, rdb.Exists(ctx, key).Val())
		}
	}
}

// Review 3 of the hold-ctx changes (registry.go Add and what follows it).

// A re-entry or downgrade is built on context.WithoutCancel(parent) as
// soon as the innermost hold of the Client in parent's ancestry is of the
// same key, even when parent is not that hold's ctx: whatever lies in
// between (the caller's own cancel or timeout, a lock of another Client)
// no longer ends the new hold's ctx. A ctx derived from a done ctx must be
// done; and with a lock of the same Client in between the hold is its
// child (Of finds that one), with another Client's it is not.
func TestNestedHoldEndsWithWhatLiesBetween(t *testing.T) {
	_, rdb, c := setup(t, nil)
	other := newClient(t, rdb, nil)
	o := runtime.LockOptions{}

	t.Run("the caller's cancel", func(t *testing.T) {
		ctx := ctxT(t)
		m := c.Mutex("between-cancel", o)
		h1, err := m.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = m.Unlock(h1) }()
		sub, cancel := context.WithCancel(h1)
		h2, err := m.Lock(sub)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = m.Unlock(h2) }()
		cancel()
		select {
		case <-h2.Done():
		case <-time.After(2 * time.Second):
			t.Errorf("the re-entry was taken with a ctx since cancelled (%v), yet its ctx is live", sub.Err())
		}
	})

	t.Run("another Client's lock", func(t *testing.T) {
		ctx := ctxT(t)
		rw := c.ReadWrite("between-client", o)
		w, err := rw.Write().Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = rw.Write().Unlock(w) }()
		x := other.Mutex("between-client-x", o)
		hx, err := x.Lock(w)
		if err != nil {
			t.Fatal(err)
		}
		r, err := rw.Read().TryLock(hx, 0, runtime.Watchdog)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = rw.Read().Unlock(r) }()
		if err := x.Unlock(hx); err != nil {
			t.Fatal(err)
		}
		select {
		case <-r.Done():
		case <-time.After(2 * time.Second):
			t.Errorf("the read hold was taken under another Client's lock, since released (%v), yet its ctx is live", hx.Err())
		}
	})
}

// checkCtx and errNotMade cover the acquire and release calls only: the
// other ctx-taking methods of the same handles still dereference a nil
// ctx (go-redis does, or the registry's ctx.Value), and a nil *MultiLock
// panics in Lock and TryLock though errors.go says a nil pointer gets
// errNotMade. Each call here must return ErrInvalidArgument (or
// ErrInvalidKey), not panic.
func TestNilContextAndNilHandlesAreTypedErrorsEverywhere(t *testing.T) {
	_, _, c := setup(t, nil)
	o := runtime.LockOptions{}
	m := c.Mutex("nil-ctx-all", o)
	rw := c.ReadWrite("nil-ctx-rw", o)
	s := c.Semaphore("nil-ctx-all-sem", runtime.SemaphoreOptions{Permits: 1})
	p := c.PlainSemaphore("nil-ctx-plain", "")
	l := c.Latch("nil-ctx-latch", runtime.LatchOptions{Count: 1})
	ml := c.MultiLock(o, c.Mutex("nil-ctx-a", o), c.Mutex("nil-ctx-b", o))
	f := c.FencedLock("nil-ctx-fenced", o)
	var nilCtx context.Context
	var nilHold context.Context // a nil ctx given as a hold's
	var nilMulti *runtime.MultiLock
	ctx := ctxT(t)
	calls := []struct {
		name string
		f    func() error
	}{
		{"Mutex.IsLocked", func() error { _, err := m.IsLocked(nilCtx); return err }},
		{"Mutex.HoldCount", func() error { _, err := m.HoldCount(nilCtx); return err }},
		{"Mutex.ForceUnlock", func() error { _, err := m.ForceUnlock(nilCtx); return err }},
		{"RWLock.Write().TryLock", func() error { _, err := rw.Write().TryLock(nilCtx, 0, 0); return err }},
		{"FencedLock.TryLockFenced", func() error { _, _, err := f.TryLockFenced(nilCtx, 0, 0); return err }},
		{"FencedLock.Token", func() error { _, err := f.Token(nilCtx); return err }},
		{"MultiLock.TryLock", func() error { _, err := ml.TryLock(nilCtx, 0, 0); return err }},
		{"MultiLock.Unlock", func() error { return ml.Unlock(nilHold) }},
		{"Semaphore.Available", func() error { _, err := s.Available(nilCtx); return err }},
		{"Semaphore.TrySetPermits", func() error { _, err := s.TrySetPermits(nilCtx, 1); return err }},
		{"PlainSemaphore.TryAcquire", func() error { return p.TryAcquire(nilCtx, 1, 0) }},
		{"PlainSemaphore.Release", func() error { return p.Release(nilCtx, 1) }},
		{"PlainSemaphore.Available", func() error { _, err := p.Available(nilCtx); return err }},
		{"Latch.CountDown", func() error { return l.CountDown(nilCtx) }},
		{"Latch.Count", func() error { _, err := l.Count(nilCtx); return err }},
		{"nil *MultiLock.TryLock", func() error { _, err := nilMulti.TryLock(ctx, 0, 0); return err }},
		{"nil *MultiLock.Lock", func() error { _, err := nilMulti.Lock(ctx); return err }},
		{"nil *MultiLock.Unlock", func() error { return nilMulti.Unlock(ctx) }},
	}
	for _, call := range calls {
		err := noPanic(t, call.name, call.f)
		if err != nil && !errors.Is(err, runtime.ErrInvalidArgument) && !errors.Is(err, runtime.ErrInvalidKey) {
			t.Errorf("%s: %v, want ErrInvalidArgument", call.name, err)
		}
		if err == nil {
			t.Errorf("%s: no error, want ErrInvalidArgument", call.name)
		}
	}
}

// Validate's '}' rule guarded the acquire calls only: the other calls that
// send scripts over the key and a name built from it (a channel, the
// token or timeout keys) failed with a raw CROSSSLOT on a cluster
// instead of ErrInvalidKey.
func TestStrayClosingBraceIsAnInvalidKeyForEveryCall(t *testing.T) {
	// The rule holds on one server too (a spec valid there must work on
	// a cluster), where the test needs no cluster to see it.
	_, _, c := setup(t, nil)
	ctx := ctxT(t)
	o := runtime.LockOptions{}
	const key = "tenant}1"
	calls := map[string]func() error{
		"Mutex.ForceUnlock":          func() error { _, err := c.Mutex(key, o).ForceUnlock(ctx); return err },
		"RWLock.Write().ForceUnlock": func() error { _, err := c.ReadWrite(key, o).Write().ForceUnlock(ctx); return err },
		"Semaphore.TrySetPermits": func() error {
			_, err := c.Semaphore(key, runtime.SemaphoreOptions{Permits: 1}).TrySetPermits(ctx, 1)
			return err
		},
		"Semaphore.AddPermits":         func() error { return c.Semaphore(key, runtime.SemaphoreOptions{Permits: 1}).AddPermits(ctx, 1) },
		"PlainSemaphore.TrySetPermits": func() error { _, err := c.PlainSemaphore(key, "").TrySetPermits(ctx, 1); return err },
		"PlainSemaphore.Release":       func() error { return c.PlainSemaphore(key, "").Release(ctx, 1) },
		"Latch.Delete":                 func() error { _, err := c.Latch(key, runtime.LatchOptions{Count: 1}).Delete(ctx); return err },
	}
	for name, f := range calls {
		if err := noPanic(t, name, f); !errors.Is(err, runtime.ErrInvalidKey) {
			t.Errorf("%s(%q) on a cluster: %v, want ErrInvalidKey", name, key, err)
		}
	}
}
