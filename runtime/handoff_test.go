package runtime_test

import (
	"context"
	"encoding"
	"errors"
	"io"
	"strconv"
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

// commandCalls reads one command's call count from INFO commandstats.
func commandCalls(t testing.TB, rdb *redis.Client, name string) int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	prefix := "cmdstat_" + name + ":calls="
	for line := range strings.Lines(info) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), prefix); ok {
			n, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
			return n
		}
	}
	return 0
}

// queueWaiters starts n goroutines that Lock m one after another (each
// is waiting on the channel before the next starts) and returns the order
// in which they got the lock. Each unlocks at once.
func queueWaiters(t *testing.T, m *runtime.Mutex, n int) (order chan int, done *sync.WaitGroup) {
	return queueWaitersFrom(t, m, 0, n)
}

// queueWaitersFrom is queueWaiters with parked waiters there already:
// the goroutines are numbered from it.
func queueWaitersFrom(t *testing.T, m *runtime.Mutex, parked, n int) (order chan int, done *sync.WaitGroup) {
	t.Helper()
	ctx := ctxT(t)
	order = make(chan int, n)
	done = &sync.WaitGroup{}
	for i := parked; i < parked+n; i++ {
		done.Add(1)
		go func() {
			defer done.Done()
			hctx, err := m.Lock(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			order <- i
			if err := m.Unlock(hctx); err != nil {
				t.Error(err)
			}
		}()
		eventually(t, 5*time.Second, "waiter parked", func() bool { return parkedOf(m) == i+1 })
	}
	return order, done
}

// A release with only waiters of its own Client hands the lock to the
// longest waiter in the release's own call: no unlock message, no acquire
// from the waiter, and the waiters go in the order they came.
func TestLocalHandoffGivesTheLockToTheLongestWaiter(t *testing.T) {
	s, rdb, c := setup(t, nil)
	plain := s.Client(t)
	ctx := ctxT(t)
	for _, sc := range []*redis.Script{lua.Handoff, lua.Release} {
		sc.Load(ctx, plain) // so that no NOSCRIPT round is counted
	}
	m := c.Mutex("handoff", runtime.LockOptions{})
	held, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const n = 6
	order, done := queueWaiters(t, m, n)
	publishes, evals := commandCalls(t, plain, "publish"), commandCalls(t, plain, "evalsha")
	if err := m.Unlock(held); err != nil {
		t.Fatal(err)
	}
	done.Wait()
	close(order)
	inOrder(t, order, 0)
	if got := commandCalls(t, plain, "publish") - publishes; got != 1 {
		t.Errorf("%d unlock messages for %d releases, want 1 (the last: nobody left to hand it to)", got, n+1)
	}
	// One script call per release; the waiters sent none.
	if got := commandCalls(t, plain, "evalsha") - evals; got != n+1 {
		t.Errorf("%d script calls for %d hand-offs, want %d (one per release)", got, n+1, n+1)
	}
	if keys := keysLeft(t, rdb); len(keys) != 0 {
		t.Fatalf("keys left: %v", keys)
	}
}

// parkedOf counts the goroutines of m's Client asleep waiting for m.
func parkedOf(m *runtime.Mutex) int { return runtime.ParkedWaiters(m) }

// Waiters of two Clients (two processes, as Redis sees them) never starve
// each other: a release that has another listener publishes, so a
// Client's own waiters cannot keep the lock among themselves.
func TestLocalHandoffNeverStarvesAnotherClient(t *testing.T) {
	s, rdb, a := setup(t, nil)
	b := newClient(t, s.Client(t), nil)
	plain := s.Client(t)
	ctx := ctxT(t)
	lua.Handoff.Load(ctx, plain)
	var got [2]atomic.Int64
	stop := time.Now().Add(1500 * time.Millisecond)
	var wg sync.WaitGroup
	for i, c := range []*runtime.Client{a, b} {
		m := c.Mutex("shared", runtime.LockOptions{})
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(stop) {
					hctx, err := m.Lock(ctx)
					if err != nil {
						t.Error(err)
						return
					}
					got[i].Add(1)
					time.Sleep(200 * time.Microsecond)
					if err := m.Unlock(hctx); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	na, nb := got[0].Load(), got[1].Load()
	t.Logf("client A %d acquisitions, client B %d", na, nb)
	// Both Clients listen on the lock's channel throughout (each always
	// has a waiter), so a release hands on locally only to the longest
	// waiter in lockgen's queue in Redis; otherwise it grants the lock to
	// that waiter in the other Client, or publishes: the two share the
	// lock about evenly.
	if min(na, nb)*2 < max(na, nb) {
		t.Fatalf("acquisitions A %d, B %d: one Client kept the lock among its own waiters", na, nb)
	}
	if keys := keysLeft(t, rdb); len(keys) != 0 {
		t.Fatalf("keys left: %v", keys)
	}
}

// handoffHook runs fn in place of every hand-off script call while on.
type handoffHook struct {
	on atomic.Bool
	fn func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error
}

func (h *handoffHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *handoffHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *handoffHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.on.Load() && isScriptCall(cmd.Args(), lua.Handoff.Hash()) {
			return h.fn(ctx, cmd, next)
		}
		return next(ctx, cmd)
	}
}

// handoffSetup is a server, a lock Client whose hand-off calls go through
// h, and a plain client for inspection.
func handoffSetup(t *testing.T, h *handoffHook) (redis.UniversalClient, *runtime.Client, *redis.Client) {
	s := redistest.Start(t)
	rdb := s.Client(t)
	plain := s.Client(t)
	lua.Handoff.Load(context.Background(), plain)
	rdb.AddHook(h)
	return rdb, newClient(t, rdb, &runtime.Options{ReleaseTimeout: 300 * time.Millisecond, WatchdogTimeout: 600 * time.Millisecond}), plain
}

// heldWithOneWaiter takes m and starts one waiter for it, parked when it
// returns; the waiter's hold ctx (nil if its Lock failed) arrives on got.
func heldWithOneWaiter(t *testing.T, m *runtime.Mutex) (held context.Context, got chan context.Context) {
	t.Helper()
	ctx := ctxT(t)
	held, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got = make(chan context.Context, 1)
	go func() {
		hctx, err := m.Lock(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- hctx
	}()
	eventually(t, 5*time.Second, "waiter parked", func() bool { return parkedOf(m) == 1 })
	return held, got
}

// A hand-off whose every reply is lost (the script ran) leaves its outcome
// unknown to the releaser; the waiter settles it and holds the lock.
func TestLocalHandoffWithLostRepliesIsSettledByTheWaiter(t *testing.T) {
	h := &handoffHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		_ = next(ctx, cmd)
		cmd.SetErr(io.ErrUnexpectedEOF)
		return io.ErrUnexpectedEOF
	}}
	rdb, c, plain := handoffSetup(t, h)
	ctx := ctxT(t)
	m := c.Mutex("lost", runtime.LockOptions{})
	held, got := heldWithOneWaiter(t, m)
	h.on.Store(true)
	if err := m.Unlock(held); !errors.Is(err, runtime.ErrOutcomeUnknown) {
		t.Fatalf("Unlock = %v, want ErrOutcomeUnknown (every reply was lost)", err)
	}
	h.on.Store(false)
	hctx := <-got
	if hctx == nil {
		t.Fatal("the waiter did not get the lock the release gave it")
	}
	if vals := plain.HVals(ctx, "lost").Val(); len(vals) != 1 || vals[0] != "1" {
		t.Fatalf("lock %v, want the waiter's one hold", vals)
	}
	if err := m.Unlock(hctx); err != nil {
		t.Fatal(err)
	}
	if keys := keysLeft(t, rdb); len(keys) != 0 {
		t.Fatalf("keys left: %v", keys)
	}
}

// A hand-off whose reply is lost, after which Redis refuses writes for a
// while (READONLY): the waiter cannot settle the offer yet, but its wait
// has time left, so it goes on waiting and settles once Redis answers. It
// used to give up at once with ErrOutcomeUnknown, 14 s of its wait left.
func TestAWaiterWhoseUnknownHandOffCannotBeSettledYetKeepsWaiting(t *testing.T) {
	t.Parallel()
	var plain *redis.Client
	h := &handoffHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		_ = next(ctx, cmd) // the lock is the waiter's in Redis
		_ = plain.Do(ctx, "REPLICAOF", "127.0.0.1", "1").Err()
		cmd.SetErr(io.ErrUnexpectedEOF)
		return io.ErrUnexpectedEOF
	}}
	rdb, c, p := handoffSetup(t, h)
	plain = p
	ctx := ctxT(t)
	m := c.Mutex("unsettled", runtime.LockOptions{})
	held, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := waitThenUnlock(func() (context.Context, error) { return m.TryLock(ctx, 15*time.Second, runtime.Watchdog) }, m.Unlock)
	eventually(t, 5*time.Second, "waiter parked", func() bool { return parkedOf(m) == 1 })
	h.on.Store(true)
	if err := m.Unlock(held); !errors.Is(err, runtime.ErrOutcomeUnknown) {
		t.Errorf("Unlock = %v, want ErrOutcomeUnknown (the reply was lost)", err)
	}
	h.on.Store(false)
	stillWaits(t, got, 500*time.Millisecond, "Redis refused writes")
	if err := plain.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	takesTheLock(t, got, 10*time.Second, "Redis answered")
	eventually(t, 5*time.Second, "no keys left", func() bool { return len(keysLeft(t, rdb)) == 0 })
}

// A hand-off that never reached Redis did not run (ErrUnavailable): the
// offer is declined, the waiter goes on waiting, and takes the lock once
// the release is finished in the background. (One sent without a reply is
// settled as aborted by the waiter instead, so that a late copy grants
// nothing: the next test.)
func TestLocalHandoffThatNeverLeftIsDeclined(t *testing.T) {
	_, plain, err := dropHandoff(t, "declined", false)
	if !errors.Is(err, runtime.ErrUnavailable) || errors.Is(err, runtime.ErrOutcomeUnknown) {
		t.Fatalf("Unlock = %v, want ErrUnavailable", err)
	}
	if n := plain.Exists(context.Background(), "declined").Val(); n != 0 {
		t.Fatalf("the lock is left held: %v", plain.HGetAll(context.Background(), "declined").Val())
	}
}

// A hand-off sent without a reply (lost on the way, not yet run) is
// settled as aborted by the waiter, which then waits for the lock as
// usual; a copy of the hand-off arriving after that never gives it the
// lock.
func TestLocalHandoffLostOnTheWayIsSettledAsAbortedAndNeverGrantsLater(t *testing.T) {
	stash, plain, err := dropHandoff(t, "aborted", true)
	if !errors.Is(err, runtime.ErrOutcomeUnknown) {
		t.Fatalf("Unlock = %v, want ErrOutcomeUnknown", err)
	}
	// The delayed copy arrives: the grant was settled, so it grants nothing.
	ctx := ctxT(t)
	plain.HSet(ctx, "aborted", stash[9], 1) // the releaser's hold (ARGV[1]), as if still there
	if err := plain.Do(ctx, stash...).Err(); err != nil {
		t.Fatal(err)
	}
	if n := plain.Exists(ctx, "aborted").Val(); n != 0 {
		t.Fatalf("the late copy left the lock held: %v", plain.HGetAll(ctx, "aborted").Val())
	}
}

// dropHandoff holds key with one waiter of the same Client and releases
// it with the hand-off dropped before Redis: sent says whether it was
// written to the wire first (its reply lost) or never left. Once the
// waiter took the lock (after the background give-back, or the old hold's
// 600 ms lease) and released it, it returns the hand-off's arguments, a
// client straight to the server, and the first Unlock's error.
func dropHandoff(t *testing.T, key string, sent bool) (handoff []any, plain *redis.Client, unlockErr error) {
	t.Helper()
	h := &handoffHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if handoff == nil {
			handoff = copyArgs(cmd.Args())
		}
		for _, a := range cmd.Args() { // written, as far as the runtime can tell
			if b, ok := a.(encoding.BinaryMarshaler); ok && sent {
				_, _ = b.MarshalBinary()
			}
		}
		cmd.SetErr(io.ErrUnexpectedEOF)
		return io.ErrUnexpectedEOF
	}}
	_, c, plain := handoffSetup(t, h)
	m := c.Mutex(key, runtime.LockOptions{})
	held, got := heldWithOneWaiter(t, m)
	h.on.Store(true)
	unlockErr = m.Unlock(held)
	h.on.Store(false)
	hctx := <-got
	if hctx == nil {
		t.Fatalf("the waiter never got the lock (the first Unlock: %v)", unlockErr)
	}
	if err := m.Unlock(hctx); err != nil {
		t.Fatal(err)
	}
	return handoff, plain, unlockErr
}

// A waiter whose ctx ends while a release is handing it the lock either
// holds the lock (the hand-off won) or leaves nothing behind; no lock is
// left held by nobody.
func TestLocalHandoffRacingTheWaitersCancellation(t *testing.T) {
	release, entered := make(chan struct{}), make(chan struct{}, 1)
	h := &handoffHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-release
		return next(ctx, cmd)
	}}
	_, c, plain := handoffSetup(t, h)
	ctx := ctxT(t)
	m := c.Mutex("race", runtime.LockOptions{})
	held, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	type result struct {
		hctx context.Context
		err  error
	}
	got := make(chan result, 1)
	go func() {
		hctx, err := m.Lock(wctx)
		got <- result{hctx, err}
	}()
	eventually(t, 5*time.Second, "waiter parked", func() bool { return parkedOf(m) == 1 })
	h.on.Store(true)
	unlocked := make(chan error, 1)
	go func() { unlocked <- m.Unlock(held) }()
	select { // the hand-off is in flight, held by the hook
	case <-entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the release sent no hand-off")
	}
	cancel()
	select {
	case r := <-got:
		t.Fatalf("Lock returned (%v) while the hand-off to it was in flight", r.err)
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	if err := <-unlocked; err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("Lock = %v, want the lock the hand-off gave it (the try that took it was in flight as ctx ended)", r.err)
	}
	if err := m.Unlock(r.hctx); err != nil {
		t.Fatal(err)
	}
	if n := plain.Exists(ctx, "race").Val(); n != 0 {
		t.Fatal("lock left held")
	}
}

// A server that refuses PUBSUB to the client (an ACL) gets the usual
// release: the waiter is woken by the unlock message and takes the lock.
// The refusal is learned once: later releases do not send the hand-off
// (Redis 7.0 words it "ERR The user executing the script can't run this
// command or subcommand", newer servers otherwise).
func TestLocalHandoffRefusedByACLFallsBackToPublish(t *testing.T) {
	s := redistest.Start(t)
	admin := s.Client(t)
	ctx := ctxT(t)
	if err := admin.Do(ctx, "ACL", "SETUSER", "locker", "on", ">pw", "~*", "&*", "+@all", "-pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), Username: "locker", Password: "pw"})
	t.Cleanup(func() { _ = rdb.Close() })
	lua.Handoff.Load(ctx, admin) // one EVALSHA per hand-off: no NOSCRIPT round
	var handoffs atomic.Int64
	h := &handoffHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		handoffs.Add(1)
		return next(ctx, cmd)
	}}
	h.on.Store(true)
	rdb.AddHook(h)
	c := newClient(t, rdb, nil)
	m := c.Mutex("acl", runtime.LockOptions{})
	for round := range 3 {
		held, err := m.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() {
			hctx, err := m.Lock(ctx)
			if err == nil {
				err = m.Unlock(hctx)
			}
			got <- err
		}()
		eventually(t, 5*time.Second, "waiter asleep", func() bool { return runtime.IdleWaiters(m) == 1 })
		if err := m.Unlock(held); err != nil {
			t.Fatalf("round %d: Unlock = %v", round, err)
		}
		if err := <-got; err != nil {
			t.Fatalf("round %d: waiter: %v", round, err)
		}
	}
	if n := admin.Exists(ctx, "acl").Val(); n != 0 {
		t.Fatal("lock left held")
	}
	if n := handoffs.Load(); n != 1 {
		t.Fatalf("%d hand-off calls in 3 releases, want 1: the refusal was not recognized, so every release paid a refused call first", n)
	}
}

// A goroutine that comes to a lock its Client's own waiters already wait
// for takes its place behind them without a try (which could only fail or
// overtake them): while they wait, newcomers send nothing; every later
// acquisition is a hand-off.
func TestLocalHandoffNewcomersBehindWaitersSendNothing(t *testing.T) {
	s, rdb, c := setup(t, nil)
	plain := s.Client(t)
	ctx := ctxT(t)
	for _, sc := range []*redis.Script{lua.Handoff, lua.Release, lua.Acquire} {
		sc.Load(ctx, plain)
	}
	m := c.Mutex("newcomers", runtime.LockOptions{})
	held, got := heldWithOneWaiter(t, m)
	evals := commandCalls(t, plain, "evalsha")
	const newcomers = 4
	order, done := queueWaitersFrom(t, m, 1, newcomers)
	if n := commandCalls(t, plain, "evalsha") - evals; n != 0 {
		t.Fatalf("%d script calls from %d newcomers behind a waiter, want 0", n, newcomers)
	}
	if err := m.Unlock(held); err != nil {
		t.Fatal(err)
	}
	first := <-got
	if first == nil {
		t.FailNow()
	}
	if err := m.Unlock(first); err != nil {
		t.Fatal(err)
	}
	done.Wait()
	close(order)
	inOrder(t, order, 1)
	// One call per release: the holder's and each waiter's.
	if n := commandCalls(t, plain, "evalsha") - evals; n != newcomers+2 {
		t.Errorf("%d script calls for %d releases, want %d (no tries)", n, newcomers+2, newcomers+2)
	}
	if keys := keysLeft(t, rdb); len(keys) != 0 {
		t.Fatalf("keys left: %v", keys)
	}
}

// inOrder fails t unless order yields first, first+1, ...: the goroutines
// got the lock in the order they came.
func inOrder(t *testing.T, order chan int, first int) {
	t.Helper()
	want := first
	for got := range order {
		if got != want {
			t.Fatalf("goroutine %d got the lock in turn %d: not first come, first served", got, want)
		}
		want++
	}
}
