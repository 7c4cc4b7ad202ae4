package runtime_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/lua"
	"github.com/lockgen/lockgen/runtime"
)

// Regression tests for the deadline invariant (design.md §7): each of them
// failed before the lease clock.

// A retry after an unknown outcome is a new request: the count in Redis is
// re-read first, so the retry is not taken for a resend of the lost one,
// and it applies its own lease.
func TestRetryAfterUnknownOutcomeAppliesItsOwnLease(t *testing.T) {
	s := redistest.Start(t)
	rdb := s.Client(t)
	plain := s.Client(t)
	ctx := ctxT(t)
	for _, sc := range []*redis.Script{lua.Acquire, lua.Settle} {
		sc.Load(ctx, plain)
	}
	lostReply := &faultHook{sha: lua.Acquire.Hash()}
	lostReply.fn = func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		_ = next(ctx, cmd) // it ran; the reply is lost
		cmd.SetErr(io.ErrUnexpectedEOF)
		return io.ErrUnexpectedEOF
	}
	settleHook := &refuseHook{sha: lua.Settle.Hash()}
	rdb.AddHook(lostReply)
	rdb.AddHook(settleHook)
	c := newClient(t, rdb, &runtime.Options{ReleaseTimeout: 200 * time.Millisecond})
	m := c.Mutex("retry", runtime.LockOptions{})

	const lease = 1500 * time.Millisecond
	outer, err := m.TryLock(ctx, 0, lease)
	if err != nil {
		t.Fatal(err)
	}
	lostReply.armed.Store(true)
	settleHook.on.Store(true)
	if _, err := m.TryLock(outer, 0, lease); !errors.Is(err, runtime.ErrOutcomeUnknown) {
		t.Fatalf("nested TryLock with reply and settlement lost = %v, want ErrOutcomeUnknown", err)
	}
	settleHook.on.Store(false)
	time.Sleep(500 * time.Millisecond)

	inner, err := m.TryLock(outer, 0, lease)
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	if fields := plain.HGetAll(ctx, "retry").Val(); len(fields) != 1 || fields[fieldWhere(func(string) bool { return true })(fields)] != "2" {
		t.Errorf("lock after the retry = %v, want one owner with count 2 (the lost request's count given back)", fields)
	}
	if ttl := plain.PTTL(ctx, "retry").Val(); ttl < lease-200*time.Millisecond {
		t.Errorf("PTTL after the retry = %v, want about the retry's own lease %v (the retry was taken for a resend)", ttl, lease)
	}
	if err := m.Unlock(inner); err != nil {
		t.Fatal(err)
	}
	if err := m.Unlock(outer); err != nil {
		t.Fatal(err)
	}
	if plain.Exists(ctx, "retry").Val() != 0 {
		t.Errorf("lock left after both unlocks: %v", plain.HGetAll(ctx, "retry").Val())
	}
}

// A watchdog renewal never shortens a longer fixed lease of the same hold,
// and a partial release re-applies the hold's own lease end.
func TestWatchdogReentryKeepsTheOuterFixedLease(t *testing.T) {
	_, rdb, c := setup(t, &runtime.Options{WatchdogTimeout: 300 * time.Millisecond})
	ctx := ctxT(t)
	m := c.Mutex("mixed", runtime.LockOptions{})
	outer, err := m.TryLock(ctx, 0, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := m.TryLock(outer, 0, runtime.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(400 * time.Millisecond) // several renewals of the nested hold
	if err := m.Unlock(inner); err != nil {
		t.Fatal(err)
	}
	time.Sleep(600 * time.Millisecond)
	if err := outer.Err(); err != nil {
		t.Fatalf("outer 3 s hold ended after 1 s: %v", context.Cause(outer))
	}
	if ttl := rdb.PTTL(ctx, "mixed").Val(); ttl < 1500*time.Millisecond {
		t.Errorf("PTTL %v one second into a 3 s lease", ttl)
	}
	if err := m.Unlock(outer); err != nil {
		t.Fatal(err)
	}
}

// An atomic multi-lock's partial release keeps a fixed lease, rather than
// stretching it to the watchdog's.
func TestAtomicMultiLockPartialReleaseKeepsTheFixedLease(t *testing.T) {
	_, rdb, c := setup(t, nil) // WatchdogTimeout 30 s
	ctx := ctxT(t)
	ml := c.MultiLock(runtime.LockOptions{}, c.Mutex("{m}a", runtime.LockOptions{}), c.Mutex("{m}b", runtime.LockOptions{}))
	if !ml.Atomic() {
		t.Fatal("not atomic")
	}
	const lease = 2 * time.Second
	outer, err := ml.TryLock(ctx, 0, lease)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := ml.TryLock(outer, 0, lease)
	if err != nil {
		t.Fatal(err)
	}
	if err := ml.Unlock(inner); err != nil {
		t.Fatal(err)
	}
	for _, k := range ml.Keys() {
		if ttl := rdb.PTTL(ctx, k).Val(); ttl > lease {
			t.Errorf("%s: PTTL %v after a partial release of a %v hold", k, ttl, lease)
		}
	}
	if err := ml.Unlock(outer); err != nil {
		t.Fatal(err)
	}
}

// refuseHook fails every EVALSHA of one script while on, as a dead link.
type refuseHook struct {
	sha string
	on  atomic.Bool
}

func (h *refuseHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *refuseHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *refuseHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.on.Load() && isScriptCall(cmd.Args(), h.sha) {
			cmd.SetErr(io.ErrUnexpectedEOF)
			return io.ErrUnexpectedEOF
		}
		return next(ctx, cmd)
	}
}

// slowHook delays every script call by d: a slow link. first, when set,
// keeps the time of the first script call; spare, when set, is how many
// script calls still pass undelayed.
type slowHook struct {
	d     time.Duration
	first *atomic.Pointer[time.Time]
	spare *atomic.Int64
}

func (h slowHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h slowHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h slowHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if a := cmd.Args(); len(a) > 0 && (a[0] == "evalsha" || a[0] == "eval") && (h.spare == nil || h.spare.Add(-1) < 0) {
			if h.first != nil {
				now := time.Now()
				h.first.CompareAndSwap(nil, &now)
			}
			time.Sleep(h.d)
		}
		return next(ctx, cmd)
	}
}

// The RedLock validity is lease − drift from the start of the attempt: the
// time the tries took is inside that window, not subtracted again. A
// granted RedLock never hands out a ctx that is already done.
//
// The attempt starts after TryLock was called and before its first try is
// sent: the deadline lies between lease − drift after the call and lease
// after that send (a loaded machine may run the attempt well after the
// call: 207 ms against a 200 ms lease was seen at load 10-18 when the
// test took the call's start as the attempt's).
func TestRedLockValidityCountsTheTriesOnce(t *testing.T) {
	servers := redistest.StartN(t, 3)
	var nodes []redis.UniversalClient
	var first atomic.Pointer[time.Time]
	for _, s := range servers {
		rdb := s.Client(t)
		rdb.AddHook(slowHook{d: 55 * time.Millisecond, first: &first})
		nodes = append(nodes, rdb)
	}
	c := newClient(t, servers[0].Client(t), &runtime.Options{RedLockNodes: nodes})
	ctx := ctxT(t)
	l := c.RedLock("red", runtime.LockOptions{})
	start := time.Now()
	const lease = 200 * time.Millisecond
	hctx, err := l.TryLock(ctx, 0, lease)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Unlock(hctx) }()
	if hctx.Err() != nil {
		t.Fatalf("granted with a ctx already done: %v", context.Cause(hctx))
	}
	dl, ok := hctx.Deadline()
	if !ok {
		t.Fatal("fixed-lease RedLock hold has no deadline")
	}
	sent := *first.Load()
	if got := dl.Sub(start); got < lease-20*time.Millisecond || dl.After(sent.Add(lease)) {
		t.Errorf("validity ends %v after the call and %v after the first try was sent, want lease − drift ≈ %v from the attempt's start", got, dl.Sub(sent), lease)
	}
}

// A reconnect is evidence that Redis may have forgotten the holds: after a
// restart without persistence the holder learns of the loss as soon as the
// Client connects again, not at its next scheduled renewal.
func TestReconnectAfterRestartEndsForgottenHoldsAtOnce(t *testing.T) {
	s := redistest.Start(t)
	rdb := s.Client(t)
	c := newClient(t, rdb, &runtime.Options{WatchdogTimeout: 6 * time.Second}) // renewals every 2 s
	ctx := ctxT(t)
	hctx, err := c.Mutex("forgotten", runtime.LockOptions{}).TryLock(ctx, 0, runtime.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	s.Restart()
	back := time.Now()
	// Any command of the Client's dials a new connection.
	if _, err := c.Mutex("other", runtime.LockOptions{}).TryLock(ctx, 0, time.Second); err != nil {
		t.Fatal(err)
	}
	select {
	case <-hctx.Done():
		t.Logf("hold ended %v after the restart: %v", time.Since(back), context.Cause(hctx))
		if !errors.Is(context.Cause(hctx), runtime.ErrLockLost) {
			t.Errorf("cause = %v, want ErrLockLost", context.Cause(hctx))
		}
	case <-time.After(1200 * time.Millisecond):
		t.Fatal("the hold outlived the restart by more than 1.2 s (the next renewal is 2 s after the acquisition)")
	}
}

// A client lockgen cannot make honour deadlines (a failover client without
// ContextTimeoutEnabled) must leave a renewal its dial and read timeouts
// within the lease; NewClient refuses a WatchdogTimeout that does not,
// naming both numbers.
func TestNewClientRefusesAWatchdogTimeoutTheClientCannotKeep(t *testing.T) {
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:    "nowhere",
		SentinelAddrs: []string{"127.0.0.1:1"},
		DialTimeout:   2 * time.Second,
		ReadTimeout:   time.Second,
	})
	defer rdb.Close()
	_, err := runtime.NewClient(rdb, &runtime.Options{WatchdogTimeout: 3 * time.Second, PubSub: runtime.PubSubClassic})
	if !errors.Is(err, runtime.ErrInvalidArgument) {
		t.Fatalf("NewClient = %v, want ErrInvalidArgument", err)
	}
	for _, want := range []string{"WatchdogTimeout 3s", "DialTimeout 2s", "ReadTimeout 1s", "ContextTimeoutEnabled", "at least 5s"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	c, err := runtime.NewClient(rdb, &runtime.Options{WatchdogTimeout: 5 * time.Second, PubSub: runtime.PubSubClassic})
	if err != nil {
		t.Fatalf("NewClient with a long enough lease: %v", err)
	}
	_ = c.Close()
}
