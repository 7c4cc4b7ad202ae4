package runtime_test

import (
	"context"
	"encoding"
	"errors"
	"fmt"
	"io"
	"slices"
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

// faultHook replaces one EVALSHA of a given script (after skip matching
// calls) by fn, to inject lost replies and delayed copies: the faults the
// request latches and settlement exist for.
type faultHook struct {
	sha   string
	skip  atomic.Int64 // how many matching calls to let through first
	armed atomic.Bool
	fn    func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error
}

func (h *faultHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *faultHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *faultHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		a := cmd.Args()
		if h.armed.Load() && isScriptCall(a, h.sha) {
			if h.skip.Add(-1) < 0 {
				h.armed.Store(false)
				return h.fn(ctx, cmd, next)
			}
		}
		return next(ctx, cmd)
	}
}

// isScriptCall reports whether args are an EVALSHA of the script with sha
// (the runtime may pass the SHA as a value that prints as it).
func isScriptCall(args []any, sha string) bool {
	return len(args) > 1 && args[0] == "evalsha" && fmt.Sprint(args[1]) == sha
}

// copyArgs copies a command's arguments to send them again later: the
// runtime may pass an argument (the SHA) as a value it reuses once the
// call returns, so it is copied as the text it prints as.
func copyArgs(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		if s, ok := a.(fmt.Stringer); ok {
			out[i] = s.String()
		} else {
			out[i] = a
		}
	}
	return out
}

// hooked returns a client with h installed, a lock Client on it and a
// plain client for inspection, with the scripts loaded.
func hooked(t *testing.T, h *faultHook) (redis.UniversalClient, *runtime.Client, *redis.Client) {
	s := redistest.Start(t)
	rdb := s.Client(t)
	plain := s.Client(t)
	for _, sc := range []*redis.Script{lua.Acquire, lua.Release, lua.Settle, lua.MultiAcquire, lua.MultiRelease, lua.FairAcquire, lua.ReadAcquire, lua.WriteAcquire} {
		sc.Load(context.Background(), plain)
	}
	rdb.AddHook(h)
	return rdb, newClient(t, rdb, &runtime.Options{WatchdogTimeout: 300 * time.Millisecond}), plain
}

// An atomic multi-lock whose reply is lost after the script ran is settled
// as taken: the caller holds every member, each once.
func TestAtomicMultiLockWithLostReplyKeepsWhatItTook(t *testing.T) {
	h := &faultHook{sha: lua.MultiAcquire.Hash()}
	h.armed.Store(true)
	h.fn = func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		_ = next(ctx, cmd)
		cmd.SetErr(io.ErrUnexpectedEOF)
		return io.ErrUnexpectedEOF
	}
	_, c, plain := hooked(t, h)
	ctx := ctxT(t)
	ml := c.MultiLock(runtime.LockOptions{}, c.Mutex("{s}a", runtime.LockOptions{}), c.Mutex("{s}b", runtime.LockOptions{}))
	if !ml.Atomic() {
		t.Fatal("not atomic")
	}
	held, err := ml.TryLock(ctx, 0, runtime.Watchdog)
	if err != nil {
		t.Fatalf("TryLock = %v, want the settlement to report the members taken", err)
	}
	for _, k := range []string{"{s}a", "{s}b"} {
		if vals := plain.HVals(ctx, k).Val(); len(vals) != 1 || vals[0] != "1" {
			t.Fatalf("%s hold counts %v, want one owner with 1", k, vals)
		}
	}
	if err := ml.Unlock(held); err != nil {
		t.Fatal(err)
	}
	if n := plain.Exists(ctx, "{s}a", "{s}b").Val(); n != 0 {
		t.Fatalf("%d members left after Unlock", n)
	}
}

// An acquire settled as aborted whose copy reaches the server later must
// not take the lock: the request never arrived (the hook keeps it, as a
// network that delays it would), the settlement finds no trace of it and
// marks it aborted, and the copy that arrives after that is refused by
// the abort marker (-3). Two cases: a fresh owner's acquire of a free lock
// (nothing else would stop the copy), and a re-entry whose owner released
// everything meanwhile.
func TestAcquireSettledAsAbortedNeverTakesTheLockLater(t *testing.T) {
	var stash []any
	h := &faultHook{sha: lua.Acquire.Hash()}
	h.fn = func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		// Written to the connection (go-redis marshals the arguments as it
		// writes them: the runtime's send probe sees it) but delivered
		// late, and its reply lost.
		for _, a := range cmd.Args() {
			if m, ok := a.(encoding.BinaryMarshaler); ok {
				_, _ = m.MarshalBinary()
			}
		}
		stash = copyArgs(cmd.Args())
		cmd.SetErr(io.ErrUnexpectedEOF)
		return io.ErrUnexpectedEOF
	}
	_, c, plain := hooked(t, h)
	ctx := ctxT(t)

	m := c.Mutex("ghost-fresh", runtime.LockOptions{})
	h.armed.Store(true)
	if _, err := m.TryLock(ctx, 0, runtime.Watchdog); err == nil {
		t.Fatal("TryLock succeeded with its request held back")
	}
	h.armed.Store(false)
	r, err := plain.Do(ctx, stash...).Int64()
	if err != nil || r != -3 {
		t.Errorf("the held-back copy of a fresh acquire: reply %v err %v, want -3 (aborted)", r, err)
	}
	if plain.Exists(ctx, "ghost-fresh").Val() == 1 {
		t.Errorf("an acquire settled as aborted took the lock later; nobody holds it locally")
	}

	m = c.Mutex("ghost", runtime.LockOptions{})
	hctx, err := m.TryLock(ctx, 0, runtime.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	h.armed.Store(true)
	_, err = m.TryLock(hctx, 0, runtime.Watchdog) // nested; request held back, settled as aborted
	h.armed.Store(false)
	t.Logf("nested TryLock err = %v", err)
	if err := m.Unlock(hctx); err != nil {
		t.Fatal(err)
	}
	// Refused: aborted (-3), or (checked first) the hold it re-enters is
	// gone (-6).
	r, err = plain.Do(ctx, stash...).Int64()
	if err != nil || r != -3 && r != -6 {
		t.Errorf("the held-back copy of a re-entry: reply %v err %v, want -3 or -6", r, err)
	}
	if plain.Exists(ctx, "ghost").Val() == 1 {
		t.Errorf("an acquire settled as aborted took the lock later; nobody holds it locally")
	}
}

// A release whose reply is lost is resent; a re-entry by another goroutine
// sharing the hold, started meanwhile, must neither make the resend count
// down a second time nor be counted away: it waits for the owner's turn.
func TestResentReleaseNeverCountsDownTwice(t *testing.T) {
	h := &faultHook{sha: lua.Release.Hash()}
	var m *runtime.Mutex
	var outer context.Context
	reentered := make(chan context.Context, 1)
	h.fn = func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		_ = next(ctx, cmd) // release ran
		// meanwhile another goroutine sharing the hold re-enters
		go func() {
			h, err := m.TryLock(outer, 0, runtime.Watchdog)
			if err != nil {
				panic(err)
			}
			reentered <- h
		}()
		time.Sleep(20 * time.Millisecond)
		cmd.SetErr(io.ErrUnexpectedEOF) // the release's reply is lost -> resent
		return io.ErrUnexpectedEOF
	}
	_, c, plain := hooked(t, h)
	ctx := ctxT(t)
	m = c.Mutex("dd", runtime.LockOptions{})
	var err error
	outer, err = m.TryLock(ctx, 0, runtime.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	nested, err := m.TryLock(outer, 0, runtime.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	h.armed.Store(true)
	if err := m.Unlock(nested); err != nil {
		t.Fatal(err)
	}
	reentry := <-reentered
	if n, _ := plain.HVals(ctx, "dd").Result(); len(n) != 1 || n[0] != "2" {
		t.Fatalf("redis hold counts %v with outer + re-entry held, want [2]", n)
	}
	if err := m.Unlock(reentry); err != nil {
		t.Fatal(err)
	}
	c2 := newClient(t, plain, nil)
	if _, err := c2.Mutex("dd", runtime.LockOptions{}).TryLock(ctx, 0, runtime.Watchdog); err == nil {
		t.Errorf("a second owner took the lock while the outer hold is still live (ctx err=%v)", outer.Err())
	}
	if err := m.Unlock(outer); err != nil {
		t.Fatal(err)
	}
	if n := plain.Exists(ctx, "dd").Val(); n != 0 {
		t.Fatalf("lock left after the last Unlock")
	}
}

// RedLock Unlock misses a loss when not every node granted.
func TestRedLockUnlockReportsALossWhenNotAllNodesGranted(t *testing.T) {
	servers := redistest.StartN(t, 3)
	var nodes []redis.UniversalClient
	var rdbs []*redis.Client
	for _, s := range servers {
		r := s.Client(t)
		rdbs = append(rdbs, r)
		nodes = append(nodes, r)
	}
	ctx := ctxT(t)
	// node 2 is held by someone else
	rdbs[2].HSet(ctx, "rl", "other:1", 1)
	rdbs[2].PExpire(ctx, "rl", time.Minute)
	c := newClient(t, rdbs[0], &runtime.Options{RedLockNodes: nodes, WatchdogTimeout: 300 * time.Millisecond})
	l := c.RedLock("rl", runtime.LockOptions{})
	hctx, err := l.TryLock(ctx, 0, runtime.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	rdbs[0].Del(ctx, "rl") // node 0 loses it: 1 of 3 now, quorum 2
	eventually(t, 2*time.Second, "hold ctx cancelled", func() bool { return hctx.Err() != nil })
	t.Logf("cause: %v", context.Cause(hctx))
	err = l.Unlock(hctx)
	t.Logf("Unlock err = %v", err)
	if errors.Is(context.Cause(hctx), runtime.ErrLockLost) && !errors.Is(err, runtime.ErrLockLost) {
		t.Errorf("hold was lost (ctx cause ErrLockLost) but Unlock reports %v", err)
	}
}

// watchdog flag is sticky: a fixed-lease hold keeps being renewed after a nested watchdog hold is released.
func TestWatchdogStopsWithTheLastWatchdogAcquisition(t *testing.T) {
	skipShortOutsideCI(t)
	// A server of its own; it checks that a key is gone well after its
	// fixed lease ran out: load can only make a renewal less likely. The
	// lease is a second: at 200 ms a loaded box once let it run out
	// before the nested acquisition was sent (which then, rightly,
	// failed).
	t.Parallel()
	const lease = time.Second
	_, rdb, c := setup(t, &runtime.Options{WatchdogTimeout: 300 * time.Millisecond})
	ctx := ctxT(t)
	m := c.Mutex("sticky", runtime.LockOptions{})
	outer, err := m.TryLock(ctx, 0, lease)
	if err != nil {
		t.Fatal(err)
	}
	nested, err := m.TryLock(outer, 0, runtime.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Unlock(nested); err != nil {
		t.Fatal(err)
	}
	deadline, _ := outer.Deadline()
	time.Sleep(time.Until(deadline) + 1300*time.Millisecond) // four renewals of the watchdog's
	t.Logf("outer ctx cause: %v; key exists=%d pttl=%v", context.Cause(outer), rdb.Exists(ctx, "sticky").Val(), rdb.PTTL(ctx, "sticky").Val())
	if rdb.Exists(ctx, "sticky").Val() == 1 {
		t.Errorf("a fixed lease of %v still held (renewed by the watchdog) 1.3 s after it ran out", lease)
	}
}

// writers first: an unlock "0" consumed by a reader blocked by the writer's intent is not handed on.
func TestWritersFirstHandsAReadersWakeUpToTheWriter(t *testing.T) {
	h := &faultHook{sha: lua.WriteAcquire.Hash()}
	s := redistest.Start(t)
	rdb := s.Client(t)
	plain := s.Client(t)
	for _, sc := range []*redis.Script{lua.WriteAcquire, lua.ReadAcquire, lua.ReadRelease} {
		sc.Load(context.Background(), plain)
	}
	rdb.AddHook(h)
	c := newClient(t, rdb, nil) // default 30s watchdog
	c0 := newClient(t, plain, nil)
	ctx := ctxT(t)
	o := runtime.LockOptions{WritersFirst: true, WaitTime: 20 * time.Second}
	r0, err := c0.ReadWrite("rw", o).Read().TryLock(ctx, 0, runtime.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	r1got := make(chan time.Time, 1)
	h.fn = func(hctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		err := next(hctx, cmd) // W's first try: intent recorded, not taken
		go func() {
			rc, err := c.ReadWrite("rw", o).Read().TryLock(ctx, 20*time.Second, runtime.Watchdog)
			if err == nil {
				r1got <- time.Now()
				_ = c.ReadWrite("rw", o).Read().Unlock(rc)
			}
		}()
		time.Sleep(200 * time.Millisecond) // R1 has tried and joined the hub before W joins
		return err
	}
	h.armed.Store(true)
	wgot := make(chan time.Time, 1)
	go func() {
		wc, err := c.ReadWrite("rw", o).Write().TryLock(ctx, 20*time.Second, runtime.Watchdog)
		if err == nil {
			wgot <- time.Now()
			time.Sleep(50 * time.Millisecond)
			_ = c.ReadWrite("rw", o).Write().Unlock(wc)
		}
	}()
	time.Sleep(500 * time.Millisecond)
	released := time.Now()
	if err := c0.ReadWrite("rw", o).Read().Unlock(r0); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-wgot:
		t.Logf("writer took the free lock %v after the release", at.Sub(released))
		if at.Sub(released) > time.Second {
			t.Errorf("writer slept %v on a free lock (lost wake-up)", at.Sub(released))
		}
	case <-time.After(15 * time.Second):
		t.Errorf("writer not woken within 15s")
	}
}

func TestRingIsRefused(t *testing.T) {
	s := redistest.Start(t)
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": s.Addr()}})
	t.Cleanup(func() { _ = ring.Close() })
	if _, err := runtime.NewClient(ring, nil); !errors.Is(err, runtime.ErrInvalidArgument) {
		t.Fatalf("NewClient(Ring) = %v, want ErrInvalidArgument", err)
	}
}

func TestKeyWithAStrayBraceIsRefused(t *testing.T) {
	_, rdb, c := setup(t, nil)
	ctx := ctxT(t)
	for _, key := range []string{"a{b", "{}x", "x}{"} {
		if _, err := c.Mutex(key, runtime.LockOptions{}).TryLock(ctx, 0, runtime.Watchdog); !errors.Is(err, runtime.ErrInvalidKey) {
			t.Errorf("key %q: %v, want ErrInvalidKey", key, err)
		}
	}
	h, err := c.Mutex("report:{acme}", runtime.LockOptions{}).TryLock(ctx, 0, runtime.Watchdog)
	if err != nil {
		t.Fatalf("a real hash tag: %v", err)
	}
	_ = c.Mutex("report:{acme}", runtime.LockOptions{}).Unlock(h)
	if left := keysLeft(t, rdb); len(left) != 0 {
		t.Fatalf("keys left: %v", left)
	}
}

// countedKinds are the kinds whose scripts check the expected hold count,
// with the acquire script each one runs and the hash field of owner's hold.
var countedKinds = []struct {
	lockKind
	acquire *redis.Script
	field   func(hash map[string]string) string
}{
	{kindByName("reentrant"), lua.Acquire, fieldWhere(func(string) bool { return true })},
	{kindByName("fair"), lua.FairAcquire, fieldWhere(func(string) bool { return true })},
	{kindByName("write"), lua.WriteAcquire, fieldWhere(func(f string) bool { return strings.HasSuffix(f, ":write") })},
	{readKind, lua.ReadAcquire, fieldWhere(func(f string) bool { return f != "mode" })},
}

// fieldWhere returns a func finding the one hash field that keep accepts.
func fieldWhere(keep func(field string) bool) func(map[string]string) string {
	return func(hash map[string]string) string {
		for f := range hash {
			if keep(f) {
				return f
			}
		}
		return ""
	}
}

// go-redis resends an acquire whose first copy ran but whose reply was
// lost: the resend reports success without counting twice, for a new
// acquisition and for a re-entry alike.
func TestResentAcquireCountsOnce(t *testing.T) {
	for _, k := range countedKinds {
		t.Run(k.name, func(t *testing.T) {
			h := &faultHook{sha: k.acquire.Hash()}
			h.fn = func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
				_ = next(ctx, cmd)    // the first copy runs; its reply is lost
				return next(ctx, cmd) // the resend
			}
			_, c, plain := hooked(t, h)
			ctx := ctxT(t)
			m := k.new(c, "resent", runtime.LockOptions{})
			count := func() string {
				hash := plain.HGetAll(ctx, "resent").Val()
				return hash[k.field(hash)]
			}
			h.armed.Store(true)
			outer, err := m.TryLock(ctx, 0, runtime.Watchdog)
			if err != nil {
				t.Fatal(err)
			}
			if n := count(); n != "1" {
				t.Fatalf("hold count %q after a resent acquire, want 1 (%v)", n, plain.HGetAll(ctx, "resent").Val())
			}
			h.armed.Store(true)
			nested, err := m.TryLock(outer, 0, runtime.Watchdog)
			if err != nil {
				t.Fatal(err)
			}
			if n := count(); n != "2" {
				t.Fatalf("hold count %q after a resent re-entry, want 2", n)
			}
			for _, hc := range []context.Context{nested, outer} {
				if err := m.Unlock(hc); err != nil {
					t.Fatal(err)
				}
			}
			if keys := plain.Keys(ctx, "*").Val(); slices.ContainsFunc(keys, func(k string) bool {
				return !expiresOnItsOwn(k)
			}) {
				t.Fatalf("keys left after both Unlocks: %v", keys)
			}
		})
	}
}

// An acquire whose reply was lost is settled as taken; a copy of it that
// reaches the server after the hold was released must not take the lock.
func TestCopyOfASettledAcquireArrivingLaterStaysOut(t *testing.T) {
	for _, k := range countedKinds {
		t.Run(k.name, func(t *testing.T) {
			var stash []any
			h := &faultHook{sha: k.acquire.Hash()}
			h.fn = func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
				stash = copyArgs(cmd.Args())
				_ = next(ctx, cmd) // ran; the reply is lost
				cmd.SetErr(io.ErrUnexpectedEOF)
				return io.ErrUnexpectedEOF
			}
			_, c, plain := hooked(t, h)
			ctx := ctxT(t)
			m := k.new(c, "late", runtime.LockOptions{})
			h.armed.Store(true)
			hctx, err := m.TryLock(ctx, 0, runtime.Watchdog)
			if err != nil {
				t.Fatalf("TryLock = %v, want the settlement to find it taken", err)
			}
			if err := m.Unlock(hctx); err != nil {
				t.Fatal(err)
			}
			r, err := plain.Do(ctx, stash...).Result()
			if plain.Exists(ctx, "late").Val() != 0 {
				t.Fatalf("a late copy of a settled acquire took the lock (reply %v %v); nobody holds it locally", r, err)
			}
		})
	}
}

// A re-entry whose outer hold is gone in Redis fails with ErrLockLost
// instead of taking the lock afresh under a count the owner does not have.
func TestReentryOfAGoneHoldIsLost(t *testing.T) {
	_, admin, c := setup(t, nil)
	ctx := ctxT(t)
	m := c.Mutex("gone", runtime.LockOptions{})
	outer, err := m.TryLock(ctx, 0, runtime.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	admin.Del(ctx, "gone")
	if _, err := m.TryLock(outer, 0, runtime.Watchdog); !errors.Is(err, runtime.ErrLockLost) {
		t.Fatalf("re-entry of a deleted hold = %v, want ErrLockLost", err)
	}
	if admin.Exists(ctx, "gone").Val() != 0 {
		t.Fatal("the refused re-entry took the lock")
	}
	_ = m.Unlock(outer)
}

// Goroutines sharing one hold re-enter and release concurrently: their
// calls take turns, so Redis's hold count always matches the client's.
func TestConcurrentReentriesKeepTheCount(t *testing.T) {
	_, _, c := setup(t, nil)
	ctx := ctxT(t)
	m := c.Mutex("turns", runtime.LockOptions{})
	outer, err := m.TryLock(ctx, 0, runtime.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 25 {
				h, err := m.TryLock(outer, 0, runtime.Watchdog)
				if err != nil {
					t.Error(err)
					return
				}
				if err := m.Unlock(h); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n, _ := m.HoldCount(outer); n != 1 {
		t.Fatalf("hold count %d after the re-entries ended, want 1", n)
	}
	if err := m.Unlock(outer); err != nil {
		t.Fatal(err)
	}
	if locked, _ := m.IsLocked(ctx); locked {
		t.Fatal("lock left after the last Unlock")
	}
}
