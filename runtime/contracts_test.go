package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/redistest"
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

// A FencedLock promises a token with every acquisition "by anyone", which
// grows with each. Taken as a member of a MultiLock whose members share a
// slot, it is taken by multi_acquire.lua, which does not INCR the token
// counter: the hold has no token (Fence reports none) and the counter does
// not move, so a paused holder's older token still passes the resource's
// check while the multi-lock's holder works under the lock. The same
// members in different slots (taken one by one) do get a token.
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

// MultiLock drops members with the same key (handles.go: CompactFunc on
// Key), whatever their kind: over both sides of one read-write lock it
// keeps only the one that sorts first, so MultiLock(rw.Read(), rw.Write())
// takes a read hold only and another reader gets in beside the holder
// that asked for the write side; over a Mutex and a FencedLock of one key
// the fenced member may be the one dropped, and the hold has no token.
// Either take every distinct member or refuse the combination with
// ErrInvalidArgument; silently dropping one is neither.
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

// A MultiLock made by one Client over members made by another is taken
// (each member through its own Client's engine, which records the hold
// in that Client's registry, renewed by its watchdog), but its Unlock
// looks the hold up in the MultiLock's Client's registry, finds nothing
// and returns ErrNotHeld: the members stay locked, renewed for as long as
// the other Client lives, and no handle can release them. Refuse such
// members (ErrInvalidArgument) or release through their own Client.
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

// Semaphore.TryAcquire checks n >= 1 but has no upper bound: the engine
// allocates n*16 bytes of permit ids before any call (semaphore.go:58),
// which panics (makeslice: len out of range) once n*16 overflows, and for
// n around 1<<36 exhausts memory and kills the process, which no recover
// catches. A count no semaphore can hold should be ErrInvalidArgument.
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

// A nil ctx is API misuse that every entry point turns into a nil
// dereference (Mutex.TryLock: m.e.Owner -> Registry.Of, ctx.Value;
// Unlock likewise; Semaphore.TryAcquire: ctx.Err()). A typed
// ErrInvalidArgument, as for a nil fn, costs one comparison.
func TestNilContextIsATypedError(t *testing.T) {
	_, _, c := setup(t, nil)
	o := runtime.LockOptions{}
	m := c.Mutex("nil-ctx", o)
	s := c.Semaphore("nil-ctx-sem", runtime.SemaphoreOptions{Permits: 1})
	var nilCtx context.Context
	calls := []struct {
		name string
		f    func() error
	}{
		{"Mutex.TryLock", func() error { _, err := m.TryLock(nilCtx, 0, 0); return err }},
		{"Mutex.Unlock", func() error { return m.Unlock(nilCtx) }},
		{"Mutex.Do", func() error { return m.Do(nilCtx, func(context.Context) error { return nil }) }},
		{"Semaphore.TryAcquire", func() error { _, err := s.TryAcquire(nilCtx, 1, 0); return err }},
		{"Semaphore.Release", func() error { return s.Release(nilCtx) }},
	}
	for _, call := range calls {
		err := noPanic(t, call.name, call.f)
		if !errors.Is(err, runtime.ErrInvalidArgument) {
			t.Errorf("%s(nil ctx) = %v, want ErrInvalidArgument", call.name, err)
		}
	}
}

// A writer may take read holds (downgrade) and "keeps them after releasing
// the write side" (rwlock.go, docs/generated-api.md). It keeps them in
// Redis and in the registry, which renews them, but the read hold's ctx
// is a child of the write hold's (holds.Registry.Add: WithCancelCause of
// the parent ctx), so Write().Unlock ends it with context.Canceled: the
// reading the downgrade is for sees its ctx done, with no ErrLockLost
// cause, and a re-entry of the read side through it fails, while the
// lock is still read-held for that owner and renewed.
// Validate (lockenv/hold.go:75) refuses a key whose '{' opens no hash tag,
// because the names derived from it (redisnames.Prefix/Suffix: channel,
// marker, queue, token, timeouts) would land in other slots. A key with a
// '}' and no '{' has the same problem the other way round: the helpers
// wrap it in braces, and its own '}' closes that tag early ("a}b" ->
// "redisson_lock__channel:{a}b}", tag "a"; "}x" -> "{}x}", an empty tag),
// while the key itself hashes whole. Every script then fails on a cluster
// with a raw CROSSSLOT reply instead of ErrInvalidKey, for every kind.
func TestKeyWithAStrayClosingBraceIsAnInvalidKeyOnCluster(t *testing.T) {
	skipShortOutsideCI(t)
	cl := redistest.StartCluster(t)
	c := newClient(t, cl.Client(t), nil)
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

// A writer that downgrades to a read hold with a fixed lease, then
// releases its write side, leaves the lock held for up to a watchdog
// lease after that read hold ran out. write_release.lua, on the last write
// hold with read holds left, sets mode "read" and keeps the hash's TTL,
// which is the write hold's (30 s, renewed until the release), instead of
// recomputing it from the readers' timeout keys as read_release.lua does.
// The read hold's timeout key expires with its lease, its ctx ends (Unlock
// reports it lost), yet the hash keeps its field in read mode: writers
// wait out the write hold's old lease for a lock no one holds or tracks.
// RedLock accepts any Quorum from 1 to the number of nodes (TryLock
// refuses only Quorum > Nodes; the DSL's "quorum: 1" too), but a quorum
// of at most half the nodes cannot exclude: two owners each granted a
// disjoint set of nodes both hold the lock. Here a Mutex holds the key on
// two of three nodes, so one RedLock owner wins the third; once that
// Mutex lets go, a second owner wins the other two. A quorum <= N/2
// should be ErrInvalidArgument (or documented as giving up exclusion).
func TestRedLockQuorumOfAMinorityIsRefused(t *testing.T) {
	servers := redistest.StartN(t, 3)
	var nodes []redis.UniversalClient
	for _, s := range servers {
		nodes = append(nodes, s.Client(t))
	}
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
	ha, err := a.RedLock(key, o).TryLock(ctx, 0, runtime.Watchdog)
	if errors.Is(err, runtime.ErrInvalidArgument) {
		return // refused: fine
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
}

// An atomic MultiLock applies one lease to every member, the longest any
// of them counts on: its acquire (holds.Registry.EnterAll returns the max
// of the members' leases to keep, calls.go:67, sent to multi_acquire.lua
// as one PX) and its release (multi.go releaseAtomic: "one lease goes to
// all", multi_release.lua's PEXPIRE). A member whose hold has a short
// fixed lease is stretched to another member's long one: its hold ends at
// its own deadline on the client (no give-back: a fixed lease is left to
// expire), while its key stays in Redis for the other member's lease,
// held for an owner nobody tracks. Here the owner holds {ml}a for 300 ms
// and {ml}b for a minute, re-enters both through the multi-lock, and
// releases that: {ml}a then lives on for a minute.
// LockOptions.QueueTimeout has no lower bound: FairLock replaces only
// values <= 0 (handles.go), and a fair waiter's sleep is bounded by
// QueueTimeout/3 (mutex/kind.go refreshEvery), which for a QueueTimeout
// under 3 ns (an integer meant as seconds: QueueTimeout: 2) is 0, that is
// no bound at all; fair_acquire.lua gets QueueTimeout.Milliseconds() = 0
// as the queue timeout. The second waiter behind a release then sleeps
// forever on a free lock. (Between 3 ns and 3 ms the bound is tiny instead:
// a waiter polls Redis every QueueTimeout/3.) A QueueTimeout too short to
// refresh should be ErrInvalidArgument, as a lease under MinLease is
// ErrInvalidLease.
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

// The zero value of most handles fails with a typed error (a Mutex, an
// RWLock's sides, a Semaphore, a PlainSemaphore, a Latch: ErrInvalidKey,
// "empty key", from lockenv.Validate), but that of a FencedLock (its
// embedded *Mutex is nil), a RedLock (nil engine: redlock.go TryLock's
// l.e.Nodes()) and a MultiLock (nil Client: the deferred observeTry reads
// l.c.opts) panics.
func TestZeroValueHandlesFailWithATypedError(t *testing.T) {
	ctx := ctxT(t)
	calls := []struct {
		name string
		f    func() error
	}{
		{"Mutex (for comparison)", func() error { var m runtime.Mutex; _, err := m.TryLock(ctx, 0, 0); return err }},
		{"FencedLock", func() error { var f runtime.FencedLock; _, _, err := f.TryLockFenced(ctx, 0, 0); return err }},
		{"RedLock", func() error { var r runtime.RedLock; _, err := r.TryLock(ctx, 0, 0); return err }},
		{"MultiLock", func() error { var m runtime.MultiLock; _, err := m.TryLock(ctx, 0, 0); return err }},
	}
	for _, call := range calls {
		err := noPanic(t, call.name, call.f)
		if !errors.Is(err, runtime.ErrInvalidKey) && !errors.Is(err, runtime.ErrInvalidArgument) {
			t.Errorf("zero %s: %v, want ErrInvalidKey or ErrInvalidArgument", call.name, err)
		}
	}
}

// The mirror case of TestDowngradedReadHoldThatRanOutFreesTheLock:
// a writer with a fixed lease downgrades to a watchdog read hold. The
// write hold's lease runs out (its ctx ends with ErrLockLost; an Unlock
// after the lease clock marked it lost sends nothing), but its
// "<owner>:write" field
// stays in the hash, in write mode, for as long as the read hold keeps
// the hash alive: read_acquire.lua applied the read's lease to the whole
// hash, and the watchdog's renewals of the read hold extend the hash
// (renew_batch.lua), write field included. No one tracks that write hold
// and no call can release it, yet it keeps every other reader and writer
// out for the read hold's whole life and up to a watchdog lease after.
// A fixed-lease hold that ends at its deadline while the key lives on
// for other holds of its owner should be given back (HDEL of its field,
// mode back to read), as a lost watchdog hold is.
