package runtime_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/internal/scripts"
)

// TestKeyTrackingOnCluster: on Redis Cluster with sharded pub/sub a lock
// freed without an unlock message (an operator's DEL, or the lease of a
// holder that died running out) wakes its waiter through key tracking on
// the slot's master, within the bound it has on one server, not at the
// 30 s TTL the waiter saw (issue #25 item 3). The single-server runs are
// there to compare with.
func TestKeyTrackingOnCluster(t *testing.T) {
	skipShortOutsideCI(t)
	cl := redistest.StartCluster(t)
	s := redistest.Start(t)
	for _, on := range []struct {
		name string
		rdb  func() redis.UniversalClient
	}{
		{"one server", func() redis.UniversalClient { return s.Client(t) }},
		{"cluster", func() redis.UniversalClient { return cl.Client(t) }},
	} {
		t.Run(on.name+"/deleted", func(t *testing.T) {
			testTrackedWake(t, on.rdb(), "tracked:del", func(ctx context.Context, rdb redis.UniversalClient, key string) time.Time {
				if err := rdb.Del(ctx, key).Err(); err != nil {
					t.Fatal(err)
				}
				return time.Now()
			})
		})
		t.Run(on.name+"/expired", func(t *testing.T) {
			testTrackedWake(t, on.rdb(), "tracked:exp", func(ctx context.Context, rdb redis.UniversalClient, key string) time.Time {
				// The dead holder's lease runs out early: 30 s left when the
				// waiter tried, 300 ms now.
				if err := rdb.PExpire(ctx, key, 300*time.Millisecond).Err(); err != nil {
					t.Fatal(err)
				}
				return time.Now().Add(300 * time.Millisecond)
			})
		})
	}
	t.Run("cluster/deleted after its slot migrated", func(t *testing.T) {
		const key = "tracked:moved"
		testTrackedWake(t, cl.Client(t), key, func(ctx context.Context, rdb redis.UniversalClient, key string) time.Time {
			to := cl.OtherMaster(key)
			cl.MigrateSlot(t, scripts.KeySlot(key), to)
			// The waiter's channel, and the key's watch, follow the slot.
			eventually(t, 5*time.Second, "the waiter's channel subscribed on the slot's new master", func() bool {
				n, _ := to.Client(t).Do(ctx, "PUBSUB", "SHARDNUMSUB", "redisson_lock__channel:{"+key+"}").Slice()
				return len(n) == 2 && n[1] == int64(1)
			})
			time.Sleep(100 * time.Millisecond) // the tracking read there is armed
			if err := rdb.Del(ctx, key).Err(); err != nil {
				t.Fatal(err)
			}
			return time.Now()
		})
	})
}

// testTrackedWake has a Client wait for key, held by a holder that died
// (a 30 s lease, no renewal, no unlock message), frees it with free
// (which returns when the key is gone), and checks that the waiter gets
// the lock within 5 s of that (the single-server tracking tests' bound;
// the waiter saw a 30 s TTL, and nothing else wakes it before), logging
// how long after.
func testTrackedWake(t *testing.T, rdb redis.UniversalClient, key string, free func(context.Context, redis.UniversalClient, string) time.Time) {
	ctx := ctxT(t)
	const dead = `redis.call('hset', KEYS[1], 'dead:1', 1); return redis.call('pexpire', KEYS[1], 30000)`
	if err := rdb.Eval(ctx, dead, []string{key}).Err(); err != nil {
		t.Fatal(err)
	}
	// No hand-offs: a waiter queued for grants tries again every second
	// (grant.go), which would hide a missed wake-up here.
	c := newClient(t, rdb, &runtime.Options{NoHandoff: true})
	m := c.Mutex(key, runtime.LockOptions{})
	got := make(chan time.Time, 1)
	go func() {
		h, err := m.TryLock(ctx, 20*time.Second, runtime.Watchdog)
		if err != nil {
			t.Error(err)
			close(got)
			return
		}
		got <- time.Now()
		_ = m.Unlock(h)
	}()
	eventually(t, 5*time.Second, "waiter asleep", func() bool { return runtime.IdleWaiters(m) == 1 })
	time.Sleep(50 * time.Millisecond) // the tracking read is armed
	freed := free(ctx, rdb, key)
	select {
	case at, ok := <-got:
		if !ok {
			return
		}
		d := at.Sub(freed)
		t.Logf("acquired %v after the key was gone", d.Round(100*time.Microsecond))
		if d > 5*time.Second {
			t.Fatalf("the waiter slept %v through a freed lock", d)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the waiter slept through a freed lock")
	}
}
