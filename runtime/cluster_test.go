package runtime_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/runtime"
)

// TestLocksOnCluster runs the lock suite on a local Redis Cluster (3
// masters, 3 replicas) through redis.UniversalClient: every script must
// declare its keys in one slot, waiters must wake through sharded channels,
// and the watchdog must batch per slot.
//
// Its subtests share the cluster (setup empties it) and run one at a time;
// the test does not run in parallel with others, as some of its checks
// are tight in time (a hand-off within 50 ms, renewals of a 900 ms lease)
// and one looks for leaked goroutines. Exclusion, which only computes,
// has a test of its own: TestLocksExcludeGoroutinesOnCluster.
func TestLocksOnCluster(t *testing.T) {
	skipShortOutsideCI(t)
	cl := redistest.StartCluster(t)
	runOnCluster(t, cl)

	t.Run("reentrancy", func(t *testing.T) { forEachKind(t, exclusiveKinds, testReenters) })
	t.Run("non-owner release", func(t *testing.T) {
		forEachKind(t, append(exclusiveKinds, readKind), testNonOwnerUnlock)
	})
	t.Run("wake-up", func(t *testing.T) { forEachKind(t, exclusiveKinds, testWakesOnUnlock) })
	t.Run("wake-up is sharded", func(t *testing.T) { testShardedWakeUp(t, cl) })
	t.Run("cancelled waiter", func(t *testing.T) { forEachKind(t, exclusiveKinds, testCancelledWaiter) })
	t.Run("fair waiters that give up", TestFairLockWaitersThatGiveUpLeaveNoTrace)
	t.Run("readers share", TestReadersShareAndWritersExclude)
	t.Run("downgrade and upgrade", TestWriterMayDowngradeButReaderMayNotUpgrade)
	t.Run("watchdog", TestWatchdogKeepsHoldAliveAndStopsAtRelease)
	t.Run("renewal across slots", testRenewalAcrossSlots)
	t.Run("multi-lock", testMultiLockOnCluster)
}

// TestLocksExcludeGoroutinesOnCluster is TestLocksExcludeGoroutines on a
// local Redis Cluster: 64 goroutines contending for every kind. It keeps
// both cores busy, so it runs before the parallel tests (which wait far
// more than they compute), its kinds at once, each on a cluster of its
// own.
func TestLocksExcludeGoroutinesOnCluster(t *testing.T) {
	skipShortOutsideCI(t)
	t.Parallel() // no time bound: only exclusion and the counter are checked
	forEachKind(t, exclusiveKinds, func(t *testing.T, k lockKind) {
		t.Parallel()
		runOnCluster(t, redistest.StartCluster(t))
		testExcludesGoroutines(t, k)
	})
}

// testShardedWakeUp proves waiters sleep on a shard channel of the key's
// master (PUBSUB SHARDNUMSUB there) and no classic channel.
func testShardedWakeUp(t *testing.T, cl *redistest.Cluster) {
	_, rdb, c := setup(t, nil)
	ctx := ctxT(t)
	m := c.Mutex("order:{7}", runtime.LockOptions{})
	h, _ := m.Lock(ctx)
	done := make(chan error, 1)
	go func() {
		w, err := m.TryLock(ctx, 10*time.Second, runtime.Watchdog)
		if err == nil {
			err = m.Unlock(w)
		}
		done <- err
	}()
	channel := "redisson_lock__channel:order:{7}"
	master := cl.MasterForKey(channel).Client(t)
	eventually(t, 5*time.Second, "shard subscription on the key's master", func() bool {
		res := master.Do(ctx, "PUBSUB", "SHARDNUMSUB", channel).Val()
		n, _ := res.([]any)
		return len(n) == 2 && n[1] == int64(1)
	})
	var classic atomic.Int64
	_ = rdb.(*redis.ClusterClient).ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
		chans, _ := n.PubSubChannels(ctx, "*").Result()
		classic.Add(int64(len(chans)))
		return nil
	})
	if n := classic.Load(); n != 0 {
		t.Fatalf("%d classic channels subscribed on a sharded cluster", n)
	}
	_ = m.Unlock(h)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// testRenewalAcrossSlots holds locks in many slots with a short watchdog:
// the renewal batches must be per slot or the cluster refuses them.
func testRenewalAcrossSlots(t *testing.T) {
	// 300 calls a period, one a slot: at 900 ms a CI run beside other
	// test binaries (load 9) ran one past a hold's deadline.
	const timeout = 1500 * time.Millisecond
	_, _, c := setup(t, &runtime.Options{WatchdogTimeout: timeout})
	ctx := ctxT(t)
	var holds []context.Context
	var locks []*runtime.Mutex
	for i := 0; i < 300; i++ {
		m := c.Mutex("renew:"+strconv.Itoa(i), runtime.LockOptions{})
		h, err := m.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		holds, locks = append(holds, h), append(locks, m)
	}
	// Two leases: a hold whose renewal the cluster refused has ended by
	// the end of its first.
	time.Sleep(2 * timeout)
	for i, h := range holds {
		if h.Err() != nil {
			t.Fatalf("hold %d lost: %v", i, context.Cause(h))
		}
		_ = locks[i].Unlock(h)
	}
}

func testMultiLockOnCluster(t *testing.T) {
	_, rdb, c := setup(t, nil)
	ctx := ctxT(t)
	same := c.MultiLock(runtime.LockOptions{}, c.Mutex("cart:{9}:a", runtime.LockOptions{}), c.Mutex("cart:{9}:b", runtime.LockOptions{}))
	if !same.Atomic() {
		t.Fatal("members in one slot not taken atomically")
	}
	cross := c.MultiLock(runtime.LockOptions{}, c.Mutex("x:1", runtime.LockOptions{}), c.Mutex("y:2", runtime.LockOptions{}))
	if cross.Atomic() {
		t.Fatal("members in different slots taken by one script")
	}
	for _, l := range []*runtime.MultiLock{same, cross} {
		err := l.Do(ctx, func(ctx context.Context) error {
			for _, k := range l.Keys() {
				if rdb.Exists(ctx, k).Val() != 1 {
					t.Errorf("member %s not held", k)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if left := keysLeft(t, rdb); len(left) != 0 {
		t.Fatalf("keys left: %v", left)
	}
}
