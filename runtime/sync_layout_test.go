package runtime_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/runtime"
)

// The synchronizers' Redis layouts are Redisson's (design.md §8), checked
// key by key, type by type, TTL by TTL and message by message, so that a
// Java client on the same names interoperates.

func TestSynchronizersUseRedissonLayouts(t *testing.T) {
	_, rdb, c := setup(t, nil)
	testSyncLayouts(t, rdb, c, false)
}

// TestSynchronizersOnCluster runs the layout checks on a local Redis
// Cluster, where every channel is a shard channel (SSUBSCRIBE/SPUBLISH),
// and a semaphore and a latch across slots.
func TestSynchronizersOnCluster(t *testing.T) {
	skipShortOutsideCI(t)
	t.Parallel() // a cluster of its own; its subtests run one at a time on it
	cl := redistest.StartCluster(t)
	runOnCluster(t, cl)
	_, rdb, c := setup(t, nil)
	testSyncLayouts(t, rdb, c, true)
	t.Run("latch with a hash tag refused", func(t *testing.T) {
		err := c.Latch("import:{7}", runtime.LatchOptions{Count: 1}).CountDown(ctxT(t))
		if !errors.Is(err, runtime.ErrInvalidKey) {
			t.Fatalf("CountDown of a tagged latch on a cluster: %v, want ErrInvalidKey", err)
		}
	})
}

// listen subscribes to channel (sharded: SSUBSCRIBE) and returns its
// payloads.
func listen(t *testing.T, rdb redis.UniversalClient, sharded bool, channel string) <-chan string {
	t.Helper()
	ctx := ctxT(t)
	var ps *redis.PubSub
	if sharded {
		ps = rdb.SSubscribe(ctx, channel)
	} else {
		ps = rdb.Subscribe(ctx, channel)
	}
	t.Cleanup(func() { _ = ps.Close() })
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	out := make(chan string, 16)
	go func() {
		for m := range ps.Channel() {
			out <- m.Payload
		}
	}()
	return out
}

func expectMessage(t *testing.T, ch <-chan string, want, what string) {
	t.Helper()
	select {
	case got := <-ch:
		if got != want {
			t.Fatalf("%s: payload %q, want %q", what, got, want)
		}
	case <-time.After(3 * time.Second):
		t.Fatalf("%s: no message (want %q)", what, want)
	}
}

func expectType(t *testing.T, rdb redis.UniversalClient, key, want string) {
	t.Helper()
	if got, _ := rdb.Type(ctxT(t), key).Result(); got != want {
		t.Fatalf("%s is a %q, want %q", key, got, want)
	}
}

func testSyncLayouts(t *testing.T, rdb redis.UniversalClient, c *runtime.Client, sharded bool) {
	t.Run("fenced lock", func(t *testing.T) {
		ctx := ctxT(t)
		f := c.FencedLock("ledger:{1}", runtime.LockOptions{})
		h, tok, err := f.LockFenced(ctx)
		if err != nil {
			t.Fatal(err)
		}
		expectType(t, rdb, "ledger:{1}", "hash")
		if ttl, _ := rdb.PTTL(ctx, "ledger:{1}").Result(); ttl <= 0 {
			t.Fatalf("lock hash TTL %v: it must always carry one", ttl)
		}
		// prefixName keeps a name that has a tag as it is.
		expectType(t, rdb, "redisson_lock_token:ledger:{1}", "string")
		if ttl, _ := rdb.PTTL(ctx, "redisson_lock_token:ledger:{1}").Result(); ttl != -1 {
			t.Fatalf("token counter TTL %v, want none", ttl)
		}
		if v, _ := rdb.Get(ctx, "redisson_lock_token:ledger:{1}").Int64(); v != tok || tok != 1 {
			t.Fatalf("token counter %d, LockFenced returned %d", v, tok)
		}
		inner, tok2, err := f.TryLockFenced(h, 0, runtime.Watchdog)
		if err != nil || tok2 != 2 {
			t.Fatalf("re-entry token %d %v, want 2", tok2, err)
		}
		// A Redisson client that takes the lock after ours INCRs the same counter.
		_ = f.Unlock(inner)
		_ = f.Unlock(h)
		rdb.Incr(ctx, "redisson_lock_token:ledger:{1}")
		h3, tok3, err := f.TryLockFenced(ctx, 0, runtime.Watchdog)
		if err != nil || tok3 != 4 {
			t.Fatalf("token after a foreign INCR %d %v, want 4", tok3, err)
		}
		_ = f.Unlock(h3)
	})
	t.Run("permit-expirable semaphore", func(t *testing.T) {
		ctx := ctxT(t)
		const name = "seats:1"
		msgs := listen(t, rdb, sharded, "redisson_sc:{seats:1}")
		sem := c.Semaphore(name, runtime.SemaphoreOptions{Permits: 2, Lease: 5 * time.Second})
		before := serverMillis(t, rdb, name)
		h, err := sem.Acquire(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		expectType(t, rdb, name, "string")
		if v, _ := rdb.Get(ctx, name).Result(); v != "1" {
			t.Fatalf("free count %q, want \"1\"", v)
		}
		expectType(t, rdb, "{seats:1}:timeout", "zset")
		held, _ := rdb.ZRangeWithScores(ctx, "{seats:1}:timeout", 0, -1).Result()
		if len(held) != 1 || len(held[0].Member.(string)) != 16 {
			t.Fatalf("held permits %v, want one 16-byte id", held)
		}
		if score := int64(held[0].Score); score < before+5000 || score > before+5000+2000 {
			t.Fatalf("permit expiry %d, want the server's now (%d) + the 5s lease", score, before)
		}
		for _, key := range []string{name, "{seats:1}:timeout"} {
			if ttl, _ := rdb.PTTL(ctx, key).Result(); ttl != -1 {
				t.Fatalf("%s has TTL %v, want none", key, ttl)
			}
		}
		if err := sem.Release(h); err != nil {
			t.Fatal(err)
		}
		expectMessage(t, msgs, "2", "release publishes the new free count")

		// A permit a Java client holds (Redisson's acquire: DECRBY and
		// ZADD its id with its expiry) blocks ours; its release (ZREM,
		// INCRBY, PUBLISH the count) wakes our waiter.
		rdb.DecrBy(ctx, name, 2)
		rdb.ZAdd(ctx, "{seats:1}:timeout", redis.Z{Score: float64(before + 60000), Member: "java-permit-1..."}, redis.Z{Score: 922337203685477, Member: "java-permit-2..."})
		got := make(chan error, 1)
		go func() {
			w, err := sem.TryAcquire(ctx, 1, 5*time.Second)
			if err == nil {
				err = sem.Release(w)
			}
			got <- err
		}()
		time.Sleep(100 * time.Millisecond)
		rdb.ZRem(ctx, "{seats:1}:timeout", "java-permit-1...")
		n := rdb.IncrBy(ctx, name, 1).Val()
		pub := "publish"
		if sharded {
			pub = "spublish"
		}
		rdb.Do(ctx, pub, "redisson_sc:{seats:1}", strconv.FormatInt(n, 10))
		if err := <-got; err != nil {
			t.Fatalf("waiter behind a Java holder: %v", err)
		}
	})
	t.Run("expired permit is reclaimed and announced", func(t *testing.T) {
		ctx := ctxT(t)
		const name = "reclaim"
		msgs := listen(t, rdb, sharded, "redisson_sc:{reclaim}")
		now := serverMillis(t, rdb, name)
		rdb.Set(ctx, name, 0, 0)
		rdb.ZAdd(ctx, "{reclaim}:timeout", redis.Z{Score: float64(now - 1), Member: "crashed-holder.."})
		sem := c.Semaphore(name, runtime.SemaphoreOptions{Permits: 1})
		n, err := sem.Available(ctx)
		if err != nil || n != 1 {
			t.Fatalf("Available after an expired permit: %d %v, want 1", n, err)
		}
		expectMessage(t, msgs, "1", "a reclaim publishes the new free count")
		if k, _ := rdb.ZCard(ctx, "{reclaim}:timeout").Result(); k != 0 {
			t.Fatal("the expired permit is still held")
		}
	})
	t.Run("plain semaphore", func(t *testing.T) {
		// Its scripts go out without go-redis' retries (RunOnce): on a
		// cluster too, routed by their first key.
		ctx := ctxT(t)
		const name = "plain:1"
		msgs := listen(t, rdb, sharded, "redisson_sc:{plain:1}")
		p := c.PlainSemaphore(name, "plain")
		if ok, err := p.TrySetPermits(ctx, 2); !ok || err != nil {
			t.Fatal(ok, err)
		}
		expectMessage(t, msgs, "2", "trySetPermits publishes the count")
		if err := p.TryAcquire(ctx, 2, 0); err != nil {
			t.Fatal(err)
		}
		if v, _ := rdb.Get(ctx, name).Result(); v != "0" {
			t.Fatalf("free count %q, want \"0\"", v)
		}
		if err := p.Release(ctx, 1); err != nil {
			t.Fatal(err)
		}
		expectMessage(t, msgs, "1", "release publishes the new free count")
		if err := p.AddPermits(ctx, 1); err != nil {
			t.Fatal(err)
		}
		expectMessage(t, msgs, "2", "adding permits publishes the new free count")
	})
	t.Run("count-down latch", func(t *testing.T) {
		ctx := ctxT(t)
		const name = "import:7"
		msgs := listen(t, rdb, sharded, "redisson_countdownlatch__channel__{import:7}")
		l := c.Latch(name, runtime.LatchOptions{Count: 2})
		if ok, err := l.Arm(ctx); !ok || err != nil {
			t.Fatal(ok, err)
		}
		expectMessage(t, msgs, "1", "trySetCount publishes 1")
		expectType(t, rdb, name, "string")
		if v, _ := rdb.Get(ctx, name).Result(); v != "2" {
			t.Fatalf("count %q, want \"2\"", v)
		}
		if ttl, _ := rdb.PTTL(ctx, name).Result(); ttl != -1 {
			t.Fatalf("latch TTL %v, want none", ttl)
		}
		_ = l.CountDown(ctx)
		_ = l.CountDown(ctx)
		expectMessage(t, msgs, "0", "reaching zero publishes 0")
		if n, _ := rdb.Exists(ctx, name).Result(); n != 0 {
			t.Fatal("a latch at zero was not deleted")
		}
		// A Java client's countDown (DECR, DEL at zero, PUBLISH 0) wakes ours.
		_, _ = l.Arm(ctx)
		<-msgs
		done := make(chan error, 1)
		go func() { done <- l.TryAwait(ctx, 5*time.Second) }()
		time.Sleep(100 * time.Millisecond)
		rdb.Decr(ctx, name)
		rdb.Decr(ctx, name)
		rdb.Del(ctx, name)
		pub := "publish"
		if sharded {
			pub = "spublish"
		}
		rdb.Do(ctx, pub, "redisson_countdownlatch__channel__{import:7}", "0")
		if err := <-done; err != nil {
			t.Fatalf("waiter released by a Java countDown: %v", err)
		}
		_, _ = l.Arm(ctx)
		<-msgs
		if ok, _ := l.Delete(ctx); !ok {
			t.Fatal("Delete found no latch")
		}
		expectMessage(t, msgs, "1", "delete publishes 1")
	})
}

// serverMillis is the Redis server's clock (of key's node) in epoch ms.
func serverMillis(t *testing.T, rdb redis.UniversalClient, key string) int64 {
	t.Helper()
	var at time.Time
	var err error
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		var node *redis.Client
		node, err = cc.MasterForKey(context.Background(), key)
		if err == nil {
			at, err = node.Time(context.Background()).Result()
		}
	} else {
		at, err = rdb.Time(context.Background()).Result()
	}
	if err != nil {
		t.Fatal(err)
	}
	return at.UnixMilli()
}
