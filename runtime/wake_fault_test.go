package runtime_test

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/faultproxy"
	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/internal/runtimetest"
	"github.com/lockgen/lockgen/runtime"
)

// Waiters never sleep through a free lock: after a fault that frees the
// lock, a waiter of every kind gets it soon after the lock is free and
// Redis is reachable. The delay (waiter's Lock returned − lock free) is
// logged per kind and fault, worst of several waiters; the bound asserted
// is loose (a loaded 2-core machine under -race), the logged numbers are
// the measurement.

const wakeReps = 5

// wakeBound is what the test asserts; the aim is 50 ms.
const wakeBound = 300 * time.Millisecond

type wakeFault struct {
	name  string
	bound time.Duration // asserted; 0: wakeBound
	// shortLease gives the holder a short watchdog lease, for faults that
	// free the lock by letting it run out; the others use a long one, so
	// that no waiter gets the lock by sleeping out the holder's TTL.
	shortLease bool
	// free frees the locks held by holder (a Client of its own) and
	// returns, per hold, when it was free with Redis reachable. The
	// waiters reach Redis through p; keys[i] are the keys of hold i.
	free func(t *testing.T, s *redistest.Server, p *faultproxy.Proxy, holder *runtime.Client, holds []func() error, keys [][]string) []time.Time
}

// unlockAll unlocks every hold and returns when each was unlocked.
func unlockAll(holds []func() error) []time.Time {
	at := make([]time.Time, len(holds))
	for i, unlock := range holds {
		_ = unlock()
		at[i] = time.Now()
	}
	return at
}

var wakeFaults = []wakeFault{
	// The holder's process dies: nothing unlocks, nothing renews; each
	// lock is free when its lease runs out.
	{name: "holder-killed", shortLease: true, free: func(t *testing.T, s *redistest.Server, _ *faultproxy.Proxy, holder *runtime.Client, holds []func() error, keys [][]string) []time.Time {
		_ = holder.Close() // stops renewing, releases nothing
		rdb := s.Client(t)
		at := make([]time.Time, len(holds))
		for left := len(holds); left > 0; time.Sleep(time.Millisecond) {
			for i, ks := range keys {
				if at[i].IsZero() && lockFree(t, rdb, ks) {
					at[i] = time.Now()
					left--
				}
			}
		}
		return at
	}},
	// Redis restarts without persistence: every lock is free once it is
	// up. While it was down, the hub's reconnects and the waiters' own
	// tries backed off to 250 ms (hub maxBackoff, await
	// maxUnreachableBackoff), so a waiter may learn that it is back up to
	// 250 ms after it answers; under load the rest took up to 90 ms more
	// (a bound of wakeBound alone failed a CI run at 284-340 ms).
	{name: "redis-restarted", bound: 250*time.Millisecond + wakeBound, free: func(t *testing.T, s *redistest.Server, _ *faultproxy.Proxy, _ *runtime.Client, holds []func() error, _ [][]string) []time.Time {
		s.Restart()
		at := make([]time.Time, len(holds))
		for i := range at {
			at[i] = time.Now()
		}
		return at
	}},
	// An operator deletes the held keys: no unlock message is published,
	// and the holders' leases are long. The hub's key tracking sees it.
	{name: "key-deleted", free: func(t *testing.T, s *redistest.Server, _ *faultproxy.Proxy, _ *runtime.Client, holds []func() error, keys [][]string) []time.Time {
		rdb := s.Client(t)
		at := make([]time.Time, len(holds))
		for i, ks := range keys {
			if err := rdb.Del(context.Background(), ks...).Err(); err != nil {
				t.Fatal(err)
			}
			at[i] = time.Now()
		}
		return at
	}},
	// FLUSHALL: every key is gone at once, queues and counters included.
	{name: "flushall", free: func(t *testing.T, s *redistest.Server, _ *faultproxy.Proxy, _ *runtime.Client, holds []func() error, _ [][]string) []time.Time {
		if err := s.Client(t).FlushAll(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
		at := make([]time.Time, len(holds))
		for i := range at {
			at[i] = time.Now()
		}
		return at
	}},
	// The server kills the waiters' pub/sub connection, then the holder
	// unlocks: the unlock messages may be lost.
	{name: "pubsub-killed", free: func(t *testing.T, s *redistest.Server, _ *faultproxy.Proxy, _ *runtime.Client, holds []func() error, _ [][]string) []time.Time {
		if err := s.Client(t).Do(context.Background(), "client", "kill", "type", "pubsub").Err(); err != nil {
			t.Fatal(err)
		}
		return unlockAll(holds)
	}},
	// The waiters' pub/sub connection freezes (half-open), then the holder
	// unlocks: the hub finds the dead connection by its missing PONG
	// (hubPingIdle + hubPingTimeout + hubHealthTick = 550 ms), resubscribes
	// and wakes everyone.
	{name: "pubsub-frozen", bound: 1500 * time.Millisecond, free: func(t *testing.T, _ *redistest.Server, p *faultproxy.Proxy, _ *runtime.Client, holds []func() error, _ [][]string) []time.Time {
		conns := p.ConnsMatching("subscribe")
		if len(conns) == 0 {
			t.Fatal("no pub/sub connection through the proxy")
		}
		for _, c := range conns {
			c.Blackhole(faultproxy.Both)
		}
		return unlockAll(holds)
	}},
}

// lockFree reports whether the lock at keys is free: its keys are gone,
// or, for a semaphore (keys[0] its counter, keys[1] its held permits), no
// permit is held past the server's clock.
func lockFree(t *testing.T, rdb redis.UniversalClient, keys []string) bool {
	ctx := context.Background()
	if len(keys) == 2 && strings.HasSuffix(keys[1], ":timeout") {
		now, err := rdb.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		held := rdb.ZCount(ctx, keys[1], "("+strconv.FormatInt(now.UnixMilli(), 10), "+inf").Val()
		return held == 0
	}
	return rdb.Exists(ctx, keys...).Val() == 0
}

func TestWaitersGetALockFreedByAFaultAtOnce(t *testing.T) {
	skipShortOutsideCI(t)
	for _, f := range wakeFaults {
		t.Run(f.name, func(t *testing.T) {
			s := redistest.Start(t)
			holderRdb := s.Client(t)
			lease := 30 * time.Second
			if f.shortLease {
				lease = 900 * time.Millisecond
			}
			holder, err := runtime.NewClient(holderRdb, &runtime.Options{WatchdogTimeout: lease})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = holder.Close() })
			p := faultproxy.Start(t, s.Addr())
			wrdb := redis.NewClient(&redis.Options{Addr: p.Addr(), Protocol: 2})
			t.Cleanup(func() { _ = wrdb.Close() })
			waiter := newClient(t, wrdb, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()

			type waitRep struct {
				kind string
				got  chan time.Time
			}
			var reps []waitRep
			var holds []func() error
			var keys [][]string
			for _, k := range runtimetest.Kinds {
				if k.Name == "red" {
					continue // RedLock waiters poll N nodes; not a pub/sub wake-up
				}
				for i := range wakeReps {
					key := fmt.Sprintf("wake:%s:%d", k.Name, i)
					h := k.Holder(holder, key)
					hctx, err := h.TryLock(ctx, 0, runtime.Watchdog)
					if err != nil {
						t.Fatal(err)
					}
					holds = append(holds, func() error { return h.Unlock(hctx) })
					switch k.Name {
					case "multi":
						keys = append(keys, []string{"{" + key + "}a", "{" + key + "}b"})
					case "semaphore":
						keys = append(keys, []string{key, "{" + key + "}:timeout"})
					default:
						keys = append(keys, []string{key})
					}
					r := waitRep{k.Name, make(chan time.Time, 1)}
					reps = append(reps, r)
					w := k.Waiter(waiter, key)
					go func() {
						for ctx.Err() == nil {
							wctx, err := w.TryLock(ctx, runtime.Forever, 5*time.Second)
							if err != nil {
								time.Sleep(5 * time.Millisecond) // Redis down: try again
								continue
							}
							r.got <- time.Now()
							_ = w.Unlock(wctx)
							return
						}
					}()
				}
			}
			time.Sleep(300 * time.Millisecond) // every waiter asleep on its channel
			// The bound allows for how late this process ran its timers
			// meanwhile: a loaded box's stall is not the runtime's.
			lag := runtimetest.StartLagMeter(t)
			bound := cmp.Or(f.bound, wakeBound)
			free := f.free(t, s, p, holder, holds, keys)
			worst := map[string]time.Duration{}
			for i, r := range reps {
				select {
				case at := <-r.got:
					d, late := at.Sub(free[i]), lag.Worst(free[i], at)
					worst[r.kind] = max(worst[r.kind], d)
					if d > bound+late {
						t.Errorf("%s: a waiter slept %v through a free lock (+ %v this process ran timers late)", r.kind, d.Round(time.Millisecond), late)
					}
				case <-ctx.Done():
					t.Fatalf("%s: a waiter never got the freed lock", r.kind)
				}
			}
			kinds := make([]string, 0, len(worst))
			for k := range worst {
				kinds = append(kinds, k)
			}
			slices.Sort(kinds)
			for _, k := range kinds {
				t.Logf("%-9s worst of %d waiters: acquired %v after the lock was free", k, wakeReps, worst[k].Round(time.Millisecond))
			}
		})
	}
}
