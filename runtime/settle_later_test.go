package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/lockgen/lockgen/internal/faultproxy"
	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/lua"
	"github.com/lockgen/lockgen/runtime"
)

// Close stops everything the Client runs: the background settlement of a
// fresh owner's lost acquire too (its settle runs detached from the
// Client's life, for up to ReleaseTimeout per attempt), so that nothing of
// the Client keeps sending on the caller's go-redis client once Close has
// returned.
func TestCloseWaitsForTheBackgroundSettlement(t *testing.T) {
	skipShortOutsideCI(t)
	s := redistest.Start(t)
	p := faultproxy.Start(t, s.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), ReadTimeout: 100 * time.Millisecond, MaxRetries: -1, Protocol: 2})
	ignore := goleak.IgnoreCurrent()
	c, err := runtime.NewClient(rdb, &runtime.Options{ReleaseTimeout: 2 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	loseAnAcquire(t, c.Mutex("review:settle:close", runtime.LockOptions{}), p)
	time.Sleep(100 * time.Millisecond) // the background settlement is in its first attempt
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	_ = rdb.Close()
	_ = p.Close()
	verifyNoLeak(t, ignore)
}

// blackholeBeforeAcquire is a go-redis hook that, once armed, blackholes
// the proxy's replies just before the next acquire script is sent: that
// acquire takes the lock in Redis and its reply is lost. The acquire is
// told by its script (acquire.lua, cached by the test's warm-up): the
// settlement of an earlier lost acquire (settle.lua) names a request
// marker too, and a clean-clone CI run had it fire the hook instead, so
// that the test's own acquire was never sent ("reproduces nothing").
type blackholeBeforeAcquire struct {
	p     *faultproxy.Proxy
	armed atomic.Bool
}

func (h *blackholeBeforeAcquire) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *blackholeBeforeAcquire) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		// The script's sha goes as a value that writes it (a
		// fmt.Stringer: scripts' send probe), not always as a string.
		if args := cmd.Args(); strings.EqualFold(cmd.Name(), "evalsha") && len(args) > 1 && fmt.Sprint(args[1]) == lua.Acquire.Hash() &&
			h.armed.CompareAndSwap(true, false) {
			h.p.Blackhole(faultproxy.Downstream)
		}
		return next(ctx, cmd)
	}
}
func (h *blackholeBeforeAcquire) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// An owner that holds another lock (its hold ctx) is fresh on a second
// lock, so a lost acquire of it is settled in the background; the same
// owner may call that lock again meanwhile, and lose that acquire too.
// The first settlement giving up (its lease is over) must not drop the
// unknown mark of the second call: the lock the second lost request took
// is still given back once Redis answers, not held until its lease.
func TestAnExpiredBackgroundSettlementKeepsTheOwnersNewerUnknownMark(t *testing.T) {
	skipShortOutsideCI(t)
	t.Parallel() // a server of its own; its times are seconds apart
	s := redistest.Start(t)
	p := faultproxy.Start(t, s.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), ReadTimeout: 100 * time.Millisecond, MaxRetries: -1, Protocol: 2})
	t.Cleanup(func() { _ = rdb.Close() })
	hook := &blackholeBeforeAcquire{p: p}
	rdb.AddHook(hook)
	c := newClient(t, rdb, &runtime.Options{ReleaseTimeout: 300 * time.Millisecond})
	ctx := ctxT(t)
	check := s.Client(t)
	const key = "review:settle:second"
	const lease = 6 * time.Second
	ha, err := c.Mutex("review:settle:first", runtime.LockOptions{}).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m := c.Mutex(key, runtime.LockOptions{})
	// Warm: the scripts cached, a connection dialled. A loaded box once
	// overran the warm-up release's 300 ms bound ("release: outcome
	// unknown"): its lock is then given back in the background, and the
	// warm-up goes again.
	eventually(t, 10*time.Second, "a warm-up round", func() bool {
		return m.Do(ctx, func(context.Context) error { return nil }) == nil
	})
	eventually(t, 10*time.Second, "the warm-up's lock free", func() bool { return check.Exists(ctx, key).Val() == 0 })

	p.Blackhole(faultproxy.Downstream)
	first := time.Now()
	if _, err := m.TryLock(ha, 0, lease); !errors.Is(err, runtime.ErrOutcomeUnknown) {
		t.Fatalf("first TryLock = %v, want ErrOutcomeUnknown", err)
	}
	// The first settlement retries with a backoff that reaches 1 s; the
	// owner calls again while it waits, and loses that acquire too.
	time.Sleep(3 * time.Second)
	hook.armed.Store(true)
	p.Heal()
	if _, err := m.TryLock(ha, 0, lease); !errors.Is(err, runtime.ErrOutcomeUnknown) {
		t.Fatalf("second TryLock = %v, want ErrOutcomeUnknown", err)
	}
	second := time.Now()
	if check.Exists(ctx, key).Val() != 1 {
		t.Fatal("the second lost request did not take the lock: the test reproduces nothing")
	}
	// Redis answers again once the first settlement has given up (its
	// lease is over) and well before the second's.
	time.Sleep(time.Until(first.Add(lease + 500*time.Millisecond)))
	p.Heal()
	healed := time.Now()
	deadline := second.Add(lease - time.Second)
	for check.Exists(ctx, key).Val() == 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if check.Exists(ctx, key).Val() == 0 {
		t.Logf("given back %v after Redis answered again", time.Since(healed).Round(time.Millisecond))
		return
	}
	t.Fatalf("the lock the second lost request took is still held %v after Redis answered: it is given back only when its lease runs out (the first settlement, giving up, dropped the second call's unknown mark)",
		time.Since(healed).Round(time.Millisecond))
}

// loseAnAcquire warms m (scripts loaded, connections open), then loses
// every reply through p and makes a top-level TryLock of m whose reply and
// settlement are both lost: it fails with ErrOutcomeUnknown, and its
// request reached Redis. The replies stay lost.
func loseAnAcquire(t *testing.T, m *runtime.Mutex, p *faultproxy.Proxy) {
	t.Helper()
	ctx := context.Background()
	if err := m.Do(ctx, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	p.Blackhole(faultproxy.Downstream) // requests arrive, replies are lost
	if _, err := m.TryLock(ctx, 0, runtime.Watchdog); !errors.Is(err, runtime.ErrOutcomeUnknown) {
		t.Fatalf("TryLock = %v, want ErrOutcomeUnknown", err)
	}
}
