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
			// The lock's channel (a fair waiter's own), and a reentrant
			// lock's grant channel with it (grant.go).
			chans := rdb.Do(ctx, "PUBSUB", "SHARDCHANNELS", "*{sharded}*").Val()
			list, _ := chans.([]any)
			if len(list) == 0 {
				return false
			}
			n := rdb.Do(ctx, append([]any{"PUBSUB", "SHARDNUMSUB"}, list...)...).Val().([]any)
			for i := 1; i < len(n); i += 2 {
				if n[i].(int64) != 1 {
					return false
				}
			}
			return true
		})
		if n := waitersOn(t, rdb, "sharded"); n != 0 {
			t.Fatalf("%d classic subscriptions in sharded mode", n)
		}
		time.Sleep(50 * time.Millisecond)
		released := time.Now()
		_ = holder.Unlock(h)
		select {
		case at := <-got:
			if d := at.Sub(released); d > 2*time.Second { // far under the holder's TTL
				t.Fatalf("woken %v after the release", d)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("waiter not woken by SPUBLISH")
		}
	})
}

// With sharded pub/sub on one server, a release must not hand the lock to
// a waiter of its own Client past a longer waiter of another Client.
// PUBSUB NUMSUB does not see SSUBSCRIBE's subscribers (a release that
// counted with it handed A's waiter the lock every time); the scripts
// count a shard channel's with SHARDNUMSUB, so the release sees B and
// grants B the lock, the longest lockgen waiter of any Client, as with
// classic pub/sub: B must win every round in both modes.
func TestShardedPubSubNeverHandsOffPastAnotherClientsWaiter(t *testing.T) {
	for name, mode := range map[string]runtime.PubSubMode{"classic": runtime.PubSubClassic, "sharded": runtime.PubSubSharded} {
		t.Run(name, func(t *testing.T) {
			s := redistest.Start(t)
			ctx := ctxT(t)
			opts := &runtime.Options{PubSub: mode}
			a, b := newClient(t, s.Client(t), opts), newClient(t, s.Client(t), opts)
			const rounds = 3
			for i := range rounds {
				if bWon := waiterRace(t, ctx, a, b, fmt.Sprintf("sharded-fifo-%d", i)); !bWon {
					t.Fatalf("round %d: A's own waiter got the lock past B, who waited longer", i)
				}
			}
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
	// B waits first: its first try queued it (a fixed sleep here was
	// shorter than a fresh Client's first call on a loaded box).
	eventually(t, 5*time.Second, "B's waiter asleep", func() bool { return runtime.IdleWaiters(mb) == 1 })
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
