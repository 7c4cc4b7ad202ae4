package runtime_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/runtime"
)

// Sharded pub/sub also works on a single Redis 7 server, which makes the
// wake-up path testable without a cluster.
func TestShardedPubSubWakesWaiters(t *testing.T) {
	forEachKind(t, exclusiveKinds, func(t *testing.T, k lockKind) {
		_, rdb, c := setup(t, &runtime.Options{PubSub: runtime.PubSubSharded})
		ctx := ctxT(t)
		holder := k.new(c, "sharded", runtime.LockOptions{Lease: 10 * time.Second})
		h, err := holder.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan time.Time, 1)
		go func() {
			m := k.new(c, "sharded", runtime.LockOptions{})
			w, err := m.TryLock(ctx, 10*time.Second, runtime.Watchdog)
			if err != nil {
				t.Error(err)
				return
			}
			got <- time.Now()
			_ = m.Unlock(w)
		}()
		eventually(t, 5*time.Second, "waiter on a shard channel", func() bool {
			chans := rdb.Do(ctx, "PUBSUB", "SHARDCHANNELS", "*{sharded}*").Val()
			list, _ := chans.([]any)
			if len(list) != 1 {
				return false
			}
			n := rdb.Do(ctx, "PUBSUB", "SHARDNUMSUB", list[0]).Val().([]any)
			return n[1].(int64) == 1
		})
		if n := waitersOn(t, rdb, "sharded"); n != 0 {
			t.Fatalf("%d classic subscriptions in sharded mode", n)
		}
		time.Sleep(50 * time.Millisecond)
		released := time.Now()
		_ = holder.Unlock(h)
		select {
		case at := <-got:
			if d := at.Sub(released); d > 100*time.Millisecond {
				t.Fatalf("woken %v after the release", d)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("waiter not woken by SPUBLISH")
		}
	})
}

// With sharded pub/sub on one server, a release cannot count the other
// Clients' waiters (PUBSUB NUMSUB does not see SSUBSCRIBE): it must not
// hand the lock to a waiter of its own Client past a longer waiter of
// another Client.
//
// Classic pub/sub counts B, so B is granted the lock: it must win every
// time. With sharded pub/sub nothing is handed over and both waiters race
// for the freed lock, which is fair game for a non-fair lock; a hand-off
// (the bug) would give it to A every time, in the release's own script
// call, so B must win at least one of a few rounds.
func TestShardedPubSubNeverHandsOffPastAnotherClientsWaiter(t *testing.T) {
	for name, mode := range map[string]runtime.PubSubMode{"classic": runtime.PubSubClassic, "sharded": runtime.PubSubSharded} {
		t.Run(name, func(t *testing.T) {
			s := redistest.Start(t)
			ctx := ctxT(t)
			opts := &runtime.Options{PubSub: mode}
			a, b := newClient(t, s.Client(t), opts), newClient(t, s.Client(t), opts)
			rounds := 1
			if mode == runtime.PubSubSharded {
				rounds = 5
			}
			for i := range rounds {
				if bWon := waiterRace(t, ctx, a, b, fmt.Sprintf("sharded-fifo-%d", i)); bWon {
					return
				}
			}
			t.Fatalf("A's own waiter got the lock past B, who waited longer, in %d of %d rounds", rounds, rounds)
		})
	}
}

// waiterRace has a Client A hold key while B's waiter and then A's wait
// for it, releases it, and reports whether B got it.
func waiterRace(t *testing.T, ctx context.Context, a, b *runtime.Client, key string) bool {
	t.Helper()
	ma, mb := a.Mutex(key, runtime.LockOptions{}), b.Mutex(key, runtime.LockOptions{})
	held, err := ma.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	gotB := lockAsync(ctx, mb)
	time.Sleep(100 * time.Millisecond) // B waits first
	gotA := lockAsync(ctx, a.Mutex(key, runtime.LockOptions{}))
	eventually(t, 5*time.Second, "A's waiter asleep", func() bool { return runtime.IdleWaiters(ma) == 1 })
	if err := ma.Unlock(held); err != nil {
		t.Fatal(err)
	}
	var (
		second chan lockResult
		other  *runtime.Mutex
		bWon   bool
	)
	select {
	case r := <-gotA:
		if r.err != nil {
			t.Fatal(r.err)
		}
		_ = ma.Unlock(r.hctx)
		second, other = gotB, mb
	case r := <-gotB:
		if r.err != nil {
			t.Fatal(r.err)
		}
		_ = mb.Unlock(r.hctx)
		second, other, bWon = gotA, ma, true
	case <-time.After(5 * time.Second):
		t.Fatal("no one got the lock")
	}
	if r := <-second; r.err == nil {
		_ = other.Unlock(r.hctx)
	}
	return bWon
}
