package runtime_test

import (
	"testing"
	"time"

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
