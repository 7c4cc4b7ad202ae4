package runtime_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/internal/scripts"
)

// TestShardedPubSubOnClusterIsPerNode: on a 3-master cluster with sharded
// pub/sub, a Client waiting on locks in many slots keeps one pub/sub
// connection per master, not one per slot (issue #25), every waiter is
// woken by its lock's release, and a slot migrated while waiters sleep on
// it takes their subscriptions along.
func TestShardedPubSubOnClusterIsPerNode(t *testing.T) {
	skipShortOutsideCI(t)
	cl := redistest.StartCluster(t)
	for _, k := range []int{10, 100, 1000} {
		t.Run(fmt.Sprintf("%d slots", k), func(t *testing.T) { testWaitersInSlots(t, cl, k) })
	}
	t.Run("slot migrated under waiters", func(t *testing.T) { testSlotMigratedUnderWaiters(t, cl) })
}

// keysInSlots returns n lock keys with prefix, each in a slot of its own.
func keysInSlots(prefix string, n int) []string {
	seen := map[int]bool{}
	var keys []string
	for i := 0; len(keys) < n; i++ {
		key := prefix + ":{" + strconv.Itoa(i) + "}"
		if s := scripts.KeySlot(key); !seen[s] {
			seen[s] = true
			keys = append(keys, key)
		}
	}
	return keys
}

// pubSubConns counts the pub/sub connections on each of masters (CLIENT
// LIST TYPE pubsub).
func pubSubConns(t *testing.T, masters []*redistest.Server) []int {
	t.Helper()
	n := make([]int, len(masters))
	for i, m := range masters {
		if ids := pubSubClientIDs(t, m.Client(t)); ids != "" {
			n[i] = strings.Count(ids, ",") + 1
		}
	}
	return n
}

func testWaitersInSlots(t *testing.T, cl *redistest.Cluster, k int) {
	ctx := ctxT(t)
	holder := newClient(t, cl.Client(t), nil)
	waiter := newClient(t, cl.Client(t), nil)
	keys := keysInSlots("perslot"+strconv.Itoa(k), k)
	holds := make([]context.Context, k)
	for i, key := range keys {
		h, err := holder.Mutex(key, runtime.LockOptions{}).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		holds[i] = h
	}
	woken := make([]chan time.Time, k)
	var wg sync.WaitGroup
	for i, key := range keys {
		woken[i] = make(chan time.Time, 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := waiter.Mutex(key, runtime.LockOptions{})
			h, err := m.TryLock(ctx, 30*time.Second, runtime.Watchdog)
			if err != nil {
				t.Errorf("waiter on %s: %v", key, err)
				return
			}
			woken[i] <- time.Now()
			_ = m.Unlock(h)
		}()
	}
	probes := make([]*runtime.Mutex, k)
	for i, key := range keys {
		probes[i] = waiter.Mutex(key, runtime.LockOptions{})
	}
	eventually(t, 20*time.Second, "every waiter asleep on its lock's channel", func() bool {
		for _, m := range probes {
			if runtime.IdleWaiters(m) != 1 {
				return false
			}
		}
		return true
	})
	masters := cl.Masters()
	conns := pubSubConns(t, masters)
	total := 0
	for _, n := range conns {
		total += n
		if n > 1 {
			t.Errorf("%d pub/sub connections on one master, want at most 1 (per master: %v)", n, conns)
		}
	}
	t.Logf("waiting on %d locks in %d slots: %d pub/sub connections (%v per master)", k, k, total, conns)
	// Key tracking: one connection per master too, redirecting to its
	// pub/sub connection (each Client's: the holder waits on nothing).
	eventually(t, 5*time.Second, "a tracking connection on every master", func() bool {
		return !slices.Contains(trackingConns(t, masters), 0)
	})
	if tracking := trackingConns(t, masters); slices.Max(tracking) > 1 {
		t.Errorf("tracking connections per master %v, want 1", tracking)
	} else {
		t.Logf("tracking connections per master: %v", tracking)
	}

	released := make([]time.Time, k)
	for i, key := range keys {
		released[i] = time.Now()
		if err := holder.Mutex(key, runtime.LockOptions{}).Unlock(holds[i]); err != nil {
			t.Fatal(err)
		}
	}
	var worst time.Duration
	for i := range keys {
		select {
		case at := <-woken[i]:
			worst = max(worst, at.Sub(released[i]))
		case <-time.After(10 * time.Second):
			t.Fatalf("the waiter on %s was not woken by its release", keys[i])
		}
	}
	wg.Wait()
	t.Logf("slowest wake-up after its release: %v", worst)
	if worst > 5*time.Second {
		t.Errorf("a waiter took %v after its release", worst)
	}
}

// testSlotMigratedUnderWaiters moves the slot of a lock with sleeping
// waiters to another master (CLUSTER SETSLOT … IMPORTING/MIGRATING,
// MIGRATE of its keys, SETSLOT … NODE everywhere, as redis-cli --cluster
// reshard does). The old master drops the slot's shard subscriptions: the
// waiters' Client subscribes again on the new master, and a release there
// wakes them. A waiter on another slot of the old master is not disturbed:
// its subscription stays on the connection it had.
func testSlotMigratedUnderWaiters(t *testing.T, cl *redistest.Cluster) {
	ctx := ctxT(t)
	holder := newClient(t, cl.Client(t), nil)
	waiter := newClient(t, cl.Client(t), nil)
	keys := keysInSlots("migrate", 2000)
	key := keys[0]
	src := cl.MasterForKey(key)
	var other string // a lock of another slot on the same master
	for _, k := range keys[1:] {
		if cl.MasterForKey(k) == src {
			other = k
			break
		}
	}
	var dst *redistest.Server
	masters := cl.Masters()
	for _, m := range masters {
		if m != src {
			dst = m
			break
		}
	}
	channel := "redisson_lock__channel:" + key
	otherChannel := "redisson_lock__channel:" + other

	const nWaiters = 3
	held, err := holder.Mutex(key, runtime.LockOptions{}).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	otherHeld, err := holder.Mutex(other, runtime.LockOptions{}).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan time.Time, nWaiters+1)
	for _, k := range append(slices.Repeat([]string{key}, nWaiters), other) {
		go func() {
			m := waiter.Mutex(k, runtime.LockOptions{})
			h, err := m.TryLock(ctx, 30*time.Second, runtime.Watchdog)
			if err != nil {
				t.Errorf("waiter on %s: %v", k, err)
				got <- time.Time{}
				return
			}
			got <- time.Now()
			_ = m.Unlock(h)
		}()
	}
	probe, otherProbe := waiter.Mutex(key, runtime.LockOptions{}), waiter.Mutex(other, runtime.LockOptions{})
	eventually(t, 10*time.Second, "the waiters asleep", func() bool {
		return runtime.IdleWaiters(probe) == nWaiters && runtime.IdleWaiters(otherProbe) == 1
	})
	srcC, dstC := src.Client(t), dst.Client(t)
	if shardSubs(t, srcC, channel) != 1 || shardSubs(t, srcC, otherChannel) != 1 {
		t.Fatal("the waiters' channels are not subscribed on the slot's master")
	}
	srcConn := pubSubClientIDs(t, srcC)

	cl.MigrateSlot(t, scripts.KeySlot(key), dst)
	moved := time.Now()
	eventually(t, 5*time.Second, "the moved slot's channel subscribed on its new master", func() bool {
		return shardSubs(t, dstC, channel) == 1 && runtime.IdleWaiters(probe) == nWaiters
	})
	t.Logf("subscribed on the new master, waiters asleep again, %v after the move", time.Since(moved))
	if n := shardSubs(t, srcC, otherChannel); n != 1 {
		t.Fatalf("the other slot's channel has %d subscribers on the old master, want 1", n)
	}
	if now := pubSubClientIDs(t, srcC); now != srcConn {
		t.Fatalf("the old master's pub/sub connection was replaced (%s, then %s): the move of one slot disturbed the others", srcConn, now)
	}
	if conns := pubSubConns(t, masters); conns[slices.Index(masters, dst)] != 1 {
		t.Fatalf("pub/sub connections per master after the move: %v", conns)
	}

	for i := range nWaiters {
		released := time.Now()
		if i == 0 {
			if err := holder.Mutex(key, runtime.LockOptions{}).Unlock(held); err != nil {
				t.Fatal(err)
			}
		}
		select {
		case at := <-got:
			if at.IsZero() {
				t.FailNow()
			}
			if i == 0 {
				d := at.Sub(released)
				t.Logf("woken %v after the release on the new master", d)
				if d > time.Second {
					t.Errorf("woken %v after the release on the new master", d)
				}
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("waiter %d of the moved slot not woken", i)
		}
	}
	if err := holder.Mutex(other, runtime.LockOptions{}).Unlock(otherHeld); err != nil {
		t.Fatal(err)
	}
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("the other slot's waiter not woken")
	}
}

// shardSubs is PUBSUB SHARDNUMSUB channel on node.
func shardSubs(t *testing.T, node *redis.Client, channel string) int64 {
	t.Helper()
	n, err := node.PubSubShardNumSub(context.Background(), channel).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n[channel]
}

// pubSubClientIDs lists the ids of node's pub/sub connections.
func pubSubClientIDs(t *testing.T, node *redis.Client) string {
	t.Helper()
	list, err := node.Do(context.Background(), "CLIENT", "LIST", "TYPE", "pubsub").Text()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		if id, ok := strings.CutPrefix(strings.Fields(line + " x")[0], "id="); ok {
			ids = append(ids, id)
		}
	}
	return strings.Join(ids, ",")
}

// trackingConns counts the connections with key tracking on (CLIENT LIST
// flags t) on each of masters.
func trackingConns(t *testing.T, masters []*redistest.Server) []int {
	t.Helper()
	n := make([]int, len(masters))
	for i, m := range masters {
		list, err := m.Client(t).Do(context.Background(), "CLIENT", "LIST").Text()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
			for _, f := range strings.Fields(line) {
				if flags, ok := strings.CutPrefix(f, "flags="); ok && strings.Contains(flags, "t") {
					n[i]++
				}
			}
		}
	}
	return n
}
