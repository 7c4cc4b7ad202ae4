package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime"
)

// What the API does with misuse and with locks it cannot hold together:
// a typed error, never a panic, a lock left held, or a hold without the
// exclusion or token its kind promises.

// noPanic runs f and turns a panic into a test error.
func noPanic(t *testing.T, what string, f func() error) (err error) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s panicked: %v", what, r)
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return f()
}

// A fenced member of a multi-lock gets its token, as taken alone: a
// multi-lock with one is not taken by multi_acquire.lua (which takes no
// token), but member by member.
func TestFencedMemberOfAnAtomicMultiLockGetsAToken(t *testing.T) {
	_, _, c := setup(t, nil)
	ctx := ctxT(t)
	o := runtime.LockOptions{}
	f := c.FencedLock("{fm}fenced", o)
	before, err := f.Token(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ml := c.MultiLock(o, f.Mutex, c.Mutex("{fm}plain", o))
	h, err := ml.TryLock(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ml.Unlock(h) }()
	after, err := f.Token(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tok, ok := runtime.Fence(h)
	if after != before+1 || !ok || tok != after {
		t.Fatalf("multi-lock (atomic=%v) over a fenced member: token counter %d -> %d, Fence(hold) = %d, %v; want the counter incremented and the hold carrying the new token",
			ml.Atomic(), before, after, tok, ok)
	}
}

// Two different locks on one key (the sides of a read-write lock, a plain
// and a fenced lock) in one multi-lock are refused, never one of them
// dropped: the read side alone would let another reader in beside the
// holder that asked for the write side, a plain lock alone has no token.
func TestMultiLockDoesNotDropAMemberOfAnotherKindOnTheSameKey(t *testing.T) {
	_, rdb, c := setup(t, nil)
	other := newClient(t, rdb, nil)
	o := runtime.LockOptions{}

	t.Run("read and write sides", func(t *testing.T) {
		ctx := ctxT(t)
		rw := c.ReadWrite("rw-both", o)
		ml := c.MultiLock(o, rw.Read(), rw.Write())
		h, err := ml.TryLock(ctx, 0, 0)
		if errors.Is(err, runtime.ErrInvalidArgument) {
			return // refused: fine
		}
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = ml.Unlock(h) }()
		r := other.ReadWrite("rw-both", o).Read()
		rh, err := r.TryLock(ctx, 0, 0)
		if err == nil {
			_ = r.Unlock(rh)
			t.Fatalf("another Client took a read hold while a multi-lock over the write side was held (multi-lock keys %v; hash %v)",
				ml.Keys(), rdb.HGetAll(ctx, "rw-both").Val())
		}
		if !errors.Is(err, runtime.ErrNotAcquired) {
			t.Fatal(err)
		}
	})

	t.Run("plain and fenced", func(t *testing.T) {
		ctx := ctxT(t)
		f := c.FencedLock("{pf}k", o)
		// The plain member is given first; the fenced one second, and on
		// a second key so that the multi-lock is atomic in no case.
		ml := c.MultiLock(o, c.Mutex("{pf}k", o), f.Mutex, c.FairLock("{pf}other", o))
		h, err := ml.TryLock(ctx, 0, 0)
		if errors.Is(err, runtime.ErrInvalidArgument) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = ml.Unlock(h) }()
		if tok, ok := runtime.Fence(h); !ok {
			n, _ := f.Token(ctx)
			t.Fatalf("a multi-lock over a FencedLock's key held it without a token (Fence = %d, %v; counter %d)", tok, ok, n)
		}
	})
}

// A multi-lock over another Client's members is refused: their holds
// would be that Client's, renewed by it, and the multi-lock's Unlock
// could not find them.
func TestMultiLockOverAnotherClientsMembersIsReleasedOrRefused(t *testing.T) {
	_, rdb, c := setup(t, nil)
	other := newClient(t, rdb, nil)
	ctx := ctxT(t)
	o := runtime.LockOptions{}
	// A fair member: the members are taken one by one.
	ml := c.MultiLock(o, other.FairLock("xc-a", o), other.Mutex("xc-b", o))
	h, err := ml.TryLock(ctx, 0, 0)
	if errors.Is(err, runtime.ErrInvalidArgument) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	uerr := ml.Unlock(h)
	if n := rdb.Exists(ctx, "xc-a", "xc-b").Val(); uerr != nil || n != 0 {
		t.Fatalf("Unlock: %v; %d member keys still held", uerr, n)
	}
}

// More permits at once than MaxPermits are refused: their ids are made
// before any call (a count past MaxInt64/16 panicked in makeslice).
func TestSemaphoreHugePermitCountIsAnError(t *testing.T) {
	_, _, c := setup(t, nil)
	ctx := ctxT(t)
	s := c.Semaphore("huge-n", runtime.SemaphoreOptions{Permits: 2})
	err := noPanic(t, "TryAcquire(MaxInt64)", func() error {
		h, err := s.TryAcquire(ctx, math.MaxInt64, 0)
		if err == nil {
			_ = s.Release(h)
		}
		return err
	})
	if !errors.Is(err, runtime.ErrInvalidArgument) {
		t.Fatalf("TryAcquire(MaxInt64 permits) = %v, want ErrInvalidArgument", err)
	}
}

// Options outside the range their docs give are refused with an error
// wrapping ErrInvalidArgument that names the option: a negative
// QueueTimeout became the default 5 min, a negative Quorum a majority,
// and a semaphore's Permits past 2^53 (the integers Lua's doubles hold)
// failed at MaxInt with Redis's bare "value is not an integer or out of
// range", matching no sentinel.
func TestOptionsOutsideTheirDocumentedRangeAreRefused(t *testing.T) {
	_, rdb, _ := setup(t, nil)
	c := newClient(t, rdb, &runtime.Options{RedLockNodes: []redis.UniversalClient{rdb, rdb, rdb}})
	ctx := ctxT(t)
	acquire := map[string]func() (context.Context, error){
		"QueueTimeout": func() (context.Context, error) {
			return c.FairLock("opt-queue", runtime.LockOptions{QueueTimeout: -time.Second}).TryLock(ctx, 0, 0)
		},
		"Quorum": func() (context.Context, error) {
			return c.RedLock("opt-quorum", runtime.LockOptions{Quorum: -1}).TryLock(ctx, 0, 0)
		},
		"Permits above 2^53": func() (context.Context, error) {
			return c.Semaphore("opt-permits", runtime.SemaphoreOptions{Permits: 1<<53 + 1}).TryAcquire(ctx, 1, 0)
		},
		"Permits at MaxInt": func() (context.Context, error) {
			return c.Semaphore("opt-permits-max", runtime.SemaphoreOptions{Permits: math.MaxInt}).TryAcquire(ctx, 1, 0)
		},
	}
	for what, f := range acquire {
		_, err := f()
		option, _, _ := strings.Cut(what, " ")
		if !errors.Is(err, runtime.ErrInvalidArgument) || !strings.Contains(err.Error(), option) {
			t.Errorf("%s: %v, want an error wrapping ErrInvalidArgument that names %s", what, err, option)
		}
	}
	// The bounds themselves are taken, and counted exactly.
	s := c.Semaphore("opt-permits-ok", runtime.SemaphoreOptions{Permits: 1 << 53})
	h, err := s.TryAcquire(ctx, 1, 0)
	if err != nil {
		t.Fatalf("Permits = 2^53: %v", err)
	}
	if n, err := s.Available(ctx); err != nil || n != 1<<53-1 {
		t.Fatalf("Permits = 2^53, one taken: Available = %d, %v; want 2^53-1", n, err)
	}
	if err := s.Release(h); err != nil {
		t.Fatal(err)
	}
	f := c.FairLock("opt-queue-ok", runtime.LockOptions{QueueTimeout: 10 * time.Millisecond})
	if h, err = f.TryLock(ctx, 0, 0); err != nil {
		t.Fatalf("QueueTimeout 10ms: %v", err)
	}
	if err := f.Unlock(h); err != nil {
		t.Fatal(err)
	}
}

// A nil ctx is ErrInvalidArgument, as a nil fn is, not a nil dereference.
func TestNilContextIsATypedError(t *testing.T) {
	_, _, c := setup(t, nil)
	o := runtime.LockOptions{}
	m := c.Mutex("nil-ctx", o)
	s := c.Semaphore("nil-ctx-sem", runtime.SemaphoreOptions{Permits: 1})
	var nilCtx context.Context
	var nilHold context.Context // a nil ctx given as a hold's
	calls := []struct {
		name string
		f    func() error
	}{
		{"Mutex.TryLock", func() error { _, err := m.TryLock(nilCtx, 0, 0); return err }},
		{"Mutex.Unlock", func() error { return m.Unlock(nilHold) }},
		{"Mutex.Do", func() error { return m.Do(nilCtx, func(context.Context) error { return nil }) }},
		{"Semaphore.TryAcquire", func() error { _, err := s.TryAcquire(nilCtx, 1, 0); return err }},
		{"Semaphore.Release", func() error { return s.Release(nilHold) }},
	}
	for _, call := range calls {
		err := noPanic(t, call.name, call.f)
		if !errors.Is(err, runtime.ErrInvalidArgument) {
			t.Errorf("%s(nil ctx) = %v, want ErrInvalidArgument", call.name, err)
		}
	}
}

// A key with a '}' that closes no hash tag is ErrInvalidKey: the name
// helpers wrap such a key in braces and its '}' ends that tag early, so
// on a cluster every script failed with a raw CROSSSLOT.
func TestKeyWithAStrayClosingBraceIsAnInvalidKey(t *testing.T) {
	// The rule holds on one server too (a spec valid there must work on
	// a cluster), where the test needs no cluster to see it.
	_, _, c := setup(t, nil)
	ctx := ctxT(t)
	o := runtime.LockOptions{}
	for _, key := range []string{"tenant}1", "}x"} {
		calls := map[string]func() error{
			"Mutex": func() error {
				h, err := c.Mutex(key, o).TryLock(ctx, 0, 0)
				if err == nil {
					_ = c.Mutex(key, o).Unlock(h)
				}
				return err
			},
			"FencedLock": func() error {
				h, _, err := c.FencedLock(key, o).TryLockFenced(ctx, 0, 0)
				if err == nil {
					_ = c.FencedLock(key, o).Unlock(h)
				}
				return err
			},
			"Semaphore": func() error {
				s := c.Semaphore(key, runtime.SemaphoreOptions{Permits: 1})
				h, err := s.TryAcquire(ctx, 1, 0)
				if err == nil {
					_ = s.Release(h)
				}
				return err
			},
		}
		for name, f := range calls {
			if err := f(); !errors.Is(err, runtime.ErrInvalidKey) {
				t.Errorf("%s(%q) on a cluster: %v, want ErrInvalidKey", name, key, err)
			}
		}
	}
}

// A RedLock quorum of at most half the nodes is refused: two owners
// granted disjoint sets of nodes would both hold it. Here a Mutex holds
// the key on two of three nodes, so A wins the third; once the Mutex lets
// go, B could win the other two.
func TestRedLockQuorumOfAMinorityIsRefused(t *testing.T) {
	nodes := startNodes(t, 3)
	a := newClient(t, nodes[0], &runtime.Options{RedLockNodes: nodes})
	b := newClient(t, nodes[0], &runtime.Options{RedLockNodes: nodes})
	blocker := newClient(t, nodes[1], &runtime.Options{RedLockNodes: nodes})
	ctx := ctxT(t)
	o := runtime.LockOptions{Quorum: 1}
	const key = "red-minority"

	// The key is taken on nodes 1 and 2 by someone else.
	var blocked []context.Context
	red := runtime.RedNodes(blocker)
	for _, n := range red[1:] {
		h, err := n.Mutex(key, runtime.LockOptions{}).TryLock(ctx, 0, runtime.Watchdog)
		if err != nil {
			t.Fatal(err)
		}
		blocked = append(blocked, h)
	}
	// A majority (2 of 3) is what the check must let through.
	hm, err := a.RedLock("red-majority", runtime.LockOptions{Quorum: 2}).TryLock(ctx, 0, runtime.Watchdog)
	if err != nil {
		t.Fatalf("quorum 2 of 3: %v", err)
	}
	_ = a.RedLock("red-majority", runtime.LockOptions{Quorum: 2}).Unlock(hm)
	ha, err := a.RedLock(key, o).TryLock(ctx, 0, runtime.Watchdog)
	if errors.Is(err, runtime.ErrInvalidArgument) {
		return // refused
	}
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = a.RedLock(key, o).Unlock(ha) }()
	for i, n := range red[1:] {
		if err := n.Mutex(key, runtime.LockOptions{}).Unlock(blocked[i]); err != nil {
			t.Fatal(err)
		}
	}
	hb, err := b.RedLock(key, o).TryLock(ctx, 0, runtime.Watchdog)
	if err == nil {
		aLive, bLive := ha.Err() == nil, hb.Err() == nil
		_ = b.RedLock(key, o).Unlock(hb)
		t.Fatalf("two owners hold the RedLock %q at once (quorum 1 of %d nodes): A's ctx live: %v, B's: %v",
			key, len(nodes), aLive, bLive)
	}
	t.Fatalf("quorum 1 of %d nodes was accepted; want ErrInvalidArgument", len(nodes))
}

// A fair lock's QueueTimeout under 10 ms is refused: its waiters refresh
// every QueueTimeout/3, and under 3 ns that was no bound at all (the
// second waiter behind a release slept on a free lock).
func TestFairLockTinyQueueTimeoutIsRefusedOrWakesItsWaiters(t *testing.T) {
	_, rdb, c := setup(t, nil)
	other := newClient(t, rdb, nil)
	ctx := ctxT(t)
	o := runtime.LockOptions{QueueTimeout: 2} // 2 ns
	const key = "fair-tiny-queue"
	h, err := c.FairLock(key, o).TryLock(ctx, 0, runtime.Watchdog)
	if errors.Is(err, runtime.ErrInvalidArgument) {
		return // refused: fine
	}
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	got := make(chan error, 2)
	for range 2 {
		go func() {
			m := other.FairLock(key, o)
			hh, err := m.TryLock(wctx, runtime.Forever, runtime.Watchdog)
			if err == nil {
				err = m.Unlock(hh)
			}
			got <- err
		}()
	}
	eventually(t, 5*time.Second, "both waiters asleep on their channels", func() bool {
		return waitersOn(t, rdb, key) == 2
	})
	if err := c.FairLock(key, o).Unlock(h); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := <-got; err != nil {
			t.Fatalf("waiter %d of 2 (the lock was released and free): %v; lock key exists: %d", i+1, err, rdb.Exists(ctx, key).Val())
		}
	}
}

// Every exported method of a handle, and of the Client, called on a nil
// pointer or on the zero value of its type (nothing a Client made) returns
// an error wrapping ErrInvalidArgument (errNotMade), never panics; a method
// without an error returns zero values, or a handle that is itself unmade.
// The calls run over the method sets, so a method added later is covered.
// Only the Mutex methods a FencedLock promotes are left out for a nil
// *FencedLock: Go dereferences the pointer to reach the embedded *Mutex.
func TestZeroValueHandlesFailWithATypedError(t *testing.T) {
	ctx := ctxT(t)
	handles := []any{
		(*runtime.Client)(nil), &runtime.Client{},
		(*runtime.Mutex)(nil), &runtime.Mutex{},
		(*runtime.FencedLock)(nil), &runtime.FencedLock{}, &runtime.FencedLock{Mutex: &runtime.Mutex{}},
		(*runtime.RWLock)(nil), &runtime.RWLock{},
		(*runtime.MultiLock)(nil), &runtime.MultiLock{},
		(*runtime.RedLock)(nil), &runtime.RedLock{},
		(*runtime.Semaphore)(nil), &runtime.Semaphore{},
		(*runtime.PlainSemaphore)(nil), &runtime.PlainSemaphore{},
		(*runtime.Latch)(nil), &runtime.Latch{},
	}
	for _, h := range handles {
		checkUnmade(t, ctx, reflect.ValueOf(h), 0)
	}
}

// checkUnmade calls every exported method of the unmade handle v with
// usable arguments, and checks what each returns (see
// TestZeroValueHandlesFailWithATypedError); a handle returned is checked
// in turn.
func checkUnmade(t *testing.T, ctx context.Context, v reflect.Value, depth int) {
	t.Helper()
	errType := reflect.TypeFor[error]()
	promoted := reflect.TypeFor[*runtime.Mutex]()
	for i := range v.NumMethod() {
		m := v.Type().Method(i)
		what := fmt.Sprintf("%s(%v).%s", v.Type(), describeUnmade(v), m.Name)
		if _, ok := promoted.MethodByName(m.Name); ok && v.Type() == reflect.TypeFor[*runtime.FencedLock]() && v.IsNil() {
			continue
		}
		ft := v.Method(i).Type()
		args := make([]reflect.Value, ft.NumIn())
		for j := range args {
			switch in := ft.In(j); {
			case in == reflect.TypeFor[context.Context]():
				args[j] = reflect.ValueOf(ctx)
			case in.Kind() == reflect.Func:
				args[j] = reflect.MakeFunc(in, func([]reflect.Value) []reflect.Value {
					t.Errorf("%s ran its fn", what)
					out := make([]reflect.Value, in.NumOut())
					for k := range out {
						out[k] = reflect.Zero(in.Out(k))
					}
					return out
				})
			case in.Kind() == reflect.Int:
				args[j] = reflect.ValueOf(1).Convert(in)
			case in.Kind() == reflect.String:
				args[j] = reflect.ValueOf("unmade").Convert(in)
			default: // wait times and leases (0: one try), options, members
				args[j] = reflect.Zero(in)
			}
		}
		var out []reflect.Value
		if noPanic(t, what, func() error {
			if ft.IsVariadic() {
				out = v.Method(i).CallSlice(args)
			} else {
				out = v.Method(i).Call(args)
			}
			return nil
		}) != nil {
			continue
		}
		for k, r := range out {
			switch {
			case ft.Out(k) == errType:
				if err, _ := r.Interface().(error); !errors.Is(err, runtime.ErrNotMade) || !errors.Is(err, runtime.ErrInvalidArgument) {
					t.Errorf("%s: error %v, want one wrapping ErrInvalidArgument for a handle not made by a Client", what, err)
				}
			case r.Kind() == reflect.Pointer && !r.IsNil() && depth == 0:
				checkUnmade(t, ctx, r, depth+1) // RWLock.Read of a zero RWLock: its zero Mutex
			case !r.IsZero():
				t.Errorf("%s: result %d is %v, want its zero value", what, k, r)
			}
		}
	}
}

// describeUnmade says which unmade value v is.
func describeUnmade(v reflect.Value) string {
	if v.IsNil() {
		return "nil"
	}
	return "zero"
}

// A writer that took a read hold with a fixed lease (a downgrade) and
// then released its write side leaves the lock in read mode for that read
// hold only: once it runs out, the lock is free. write_release.lua kept
// the write hold's TTL (up to a watchdog lease) as Redisson's does; it now
// keeps the hash as long as the read holds' timeout keys.
func TestDowngradedReadHoldThatRanOutFreesTheLock(t *testing.T) {
	_, rdb, c := setup(t, nil)
	other := newClient(t, rdb, nil)
	ctx := ctxT(t)
	o := runtime.LockOptions{}
	const readLease = 200 * time.Millisecond
	rw, w, r := downgrade(t, c, "downgrade-ttl", runtime.Watchdog, readLease)
	if err := rw.Write().Unlock(w); err != nil {
		t.Fatal(err)
	}
	// The read hold's own key runs out with its lease.
	eventually(t, 5*time.Second, "the read hold's timeout key gone", func() bool {
		return len(rdb.Keys(ctx, "{downgrade-ttl}:*rwlock_timeout*").Val()) == 0
	})
	start := time.Now()
	wh, err := other.ReadWrite("downgrade-ttl", o).Write().TryLock(ctx, 3*time.Second, runtime.Watchdog)
	if err != nil {
		t.Fatalf("a writer waited %v for a lock whose only hold ran out %v after the write release: %v (hash %v, PTTL %v)",
			time.Since(start).Round(time.Millisecond), readLease, err, rdb.HGetAll(ctx, "downgrade-ttl").Val(), rdb.PTTL(ctx, "downgrade-ttl").Val())
	}
	_ = other.ReadWrite("downgrade-ttl", o).Write().Unlock(wh)
	_ = rw.Read().Unlock(r)
}

// An atomic multi-lock keeps each member's own lease: its acquire and
// its release applied the longest lease of any member to all of them, so
// a member held with a short fixed lease outlived its hold in Redis by
// another member's lease, held for an owner nobody tracked. Here the
// owner holds {ml}a for a second and {ml}b for a minute, re-enters both
// through the multi-lock and releases that: {ml}a must go with its hold.
// (At 300 ms, a loaded box's stall could let {ml}a run out before the
// next call, as it did in TestWatchdogStopsWithTheLastWatchdogAcquisition.)
func TestAtomicMultiLockKeepsEachMembersOwnLease(t *testing.T) {
	_, rdb, c := setup(t, nil)
	other := newClient(t, rdb, nil)
	ctx := ctxT(t)
	o := runtime.LockOptions{}
	a, b := c.Mutex("{ml}a", o), c.Mutex("{ml}b", o)
	ha, err := a.TryLock(ctx, 0, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	hb, err := b.TryLock(ha, 0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	ml := c.MultiLock(o, a, b)
	if !ml.Atomic() {
		t.Fatal("the multi-lock is not atomic")
	}
	hm, err := ml.TryLock(hb, 0, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("PTTL of {ml}a after the multi-lock's acquire: %v", rdb.PTTL(ctx, "{ml}a").Val())
	if err := ml.Unlock(hm); err != nil {
		t.Fatal(err)
	}
	// a's own hold runs out with its lease.
	select {
	case <-ha.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the one-second hold of {ml}a did not end")
	}
	pttl := rdb.PTTL(ctx, "{ml}a").Val()
	h, err := other.Mutex("{ml}a", o).TryLock(ctx, 2*time.Second, runtime.Watchdog)
	if err != nil {
		t.Fatalf("{ml}a, whose only hold ran out, is still held in Redis (PTTL %v when its hold's ctx ended): %v", pttl, err)
	}
	_ = other.Mutex("{ml}a", o).Unlock(h)
	_ = b.Unlock(hb)
}

// A writer that took a read hold (a downgrade) keeps it after releasing
// the write side, as the docs promise: the read hold's ctx, a child of the
// write hold's, used to end with the write release (context.Canceled)
// while the read hold lived on in Redis. A hold taken under a hold of the
// same lock by its owner now ends only with its own hold, or with what
// the outer one was taken under.
func TestDowngradedReadHoldOutlivesTheWriteRelease(t *testing.T) {
	_, rdb, c := setup(t, nil)
	ctx := ctxT(t)
	rw, w, r := downgrade(t, c, "downgrade", runtime.Watchdog, runtime.Watchdog)
	defer func() { _ = rw.Read().Unlock(r) }()
	if err := rw.Write().Unlock(w); err != nil {
		t.Fatal(err)
	}
	if mode := rdb.HGet(ctx, "downgrade", "mode").Val(); mode != "read" {
		t.Fatalf("after the write release: mode %q; want the downgraded read hold kept", mode)
	}
	if r.Err() != nil {
		t.Errorf("the downgraded read hold is kept, yet its ctx is done: %v (cause %v)", r.Err(), context.Cause(r))
	}
	r2, err := rw.Read().TryLock(r, 0, runtime.Watchdog)
	if err != nil {
		t.Fatalf("re-entering the kept read hold: %v", err)
	}
	_ = rw.Read().Unlock(r2)
}

// A write hold with a fixed lease that runs out while its owner's read
// hold (a downgrade) keeps the hash alive is given back: its field stayed
// in the hash, in write mode, renewed with the read hold, and kept every
// other reader out with no call able to release it. A fixed lease is
// left to expire in Redis, except when another hold of its owner keeps
// the key.
func TestWriteHoldThatRanOutUnderADowngradeIsGivenBack(t *testing.T) {
	_, rdb, c := setup(t, nil)
	other := newClient(t, rdb, nil)
	ctx := ctxT(t)
	o := runtime.LockOptions{}
	// The read hold must be taken under the write hold before its fixed
	// lease runs out. With a 300 ms lease and a cold client (a dial, the
	// read script's NOSCRIPT and SCRIPT LOAD) a loaded box overran it
	// ("acquire: context deadline exceeded: lease: lock lost: fixed lease
	// of 300ms ran out"). A warm-up downgrade leaves one round trip in that
	// window, and the lease is 1 s: its length is not what this test
	// checks, only that the write hold runs out under the read hold.
	wrw, ww, wr := downgrade(t, c, "downgrade-write-ttl", runtime.Watchdog, runtime.Watchdog)
	if err := wrw.Read().Unlock(wr); err != nil {
		t.Fatal(err)
	}
	if err := wrw.Write().Unlock(ww); err != nil {
		t.Fatal(err)
	}
	rw, w, r := downgrade(t, c, "downgrade-write-ttl", time.Second, runtime.Watchdog)
	defer func() { _ = rw.Read().Unlock(r) }()
	select {
	case <-w.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the 1 s write hold did not end")
	}
	if !errors.Is(context.Cause(w), runtime.ErrLockLost) {
		t.Fatalf("the write hold ended with %v, want its lease run out", context.Cause(w))
	}
	// Its holder is told the hold is lost; it does not Unlock (an Unlock
	// once the lease clock marked it lost sends nothing anyway). Only a
	// read hold is left, by any account but the hash's.
	oh, err := other.ReadWrite("downgrade-write-ttl", o).Read().TryLock(ctx, 2*time.Second, runtime.Watchdog)
	if err != nil {
		t.Fatalf("another reader, with only a read hold left: %v (hash %v, PTTL %v)",
			err, rdb.HGetAll(ctx, "downgrade-write-ttl").Val(), rdb.PTTL(ctx, "downgrade-write-ttl").Val())
	}
	_ = other.ReadWrite("downgrade-write-ttl", o).Read().Unlock(oh)
}

// downgrade takes the write side of the read-write lock at key with
// writeLease, then a read hold under it with readLease.
func downgrade(t *testing.T, c *runtime.Client, key string, writeLease, readLease time.Duration) (rw *runtime.RWLock, w, r context.Context) {
	t.Helper()
	rw = c.ReadWrite(key, runtime.LockOptions{})
	w, err := rw.Write().TryLock(ctxT(t), 0, writeLease)
	if err != nil {
		t.Fatal(err)
	}
	if r, err = rw.Read().TryLock(w, 0, readLease); err != nil {
		t.Fatal(err)
	}
	return rw, w, r
}

// A semaphore's count set or changed past 2^53 either way is refused, as
// SemaphoreOptions.Permits is: SetPermits(1e17) stored "1e+17" (Lua's
// doubles), and every acquire then failed with Redis's "value is not an
// integer or out of range" until the next SetPermits; TrySetPermits of
// MaxInt made Available report MinInt.
func TestSemaphoreCountsPast2p53AreRefused(t *testing.T) {
	_, _, c := setup(t, nil)
	ctx := ctxT(t)
	s := c.Semaphore("count-range", runtime.SemaphoreOptions{})
	for what, f := range map[string]func() error{
		"SetPermits(1e17)":      func() error { return s.SetPermits(ctx, 1e17) },
		"SetPermits(2^53+1)":    func() error { return s.SetPermits(ctx, 1<<53+1) },
		"TrySetPermits(MaxInt)": func() error { _, err := s.TrySetPermits(ctx, math.MaxInt); return err },
		"AddPermits(2^53+1)":    func() error { return s.AddPermits(ctx, 1<<53+1) },
		"AddPermits(-(2^53+1))": func() error { return s.AddPermits(ctx, -(1<<53 + 1)) },
	} {
		if err := f(); !errors.Is(err, runtime.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", what, err)
		}
	}
	if err := s.SetPermits(ctx, 1<<53); err != nil {
		t.Fatalf("SetPermits(2^53): %v", err)
	}
	h, err := s.TryAcquire(ctx, 1, 0)
	if err != nil {
		t.Fatalf("after SetPermits(2^53): %v", err)
	}
	if n, err := s.Available(ctx); err != nil || n != 1<<53-1 {
		t.Fatalf("SetPermits(2^53), one taken: Available = %d, %v; want 2^53-1", n, err)
	}
	if err := s.Release(h); err != nil {
		t.Fatal(err)
	}
}
