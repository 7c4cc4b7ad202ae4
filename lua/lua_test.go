package lua_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/lua"
)

// The scripts' documented return values, checked one by one.

// latch is the request latch of request id req on the test lock.
func latch(req string) string { return "lockgen_latch:{doc}:" + req }

const (
	lock    = "doc"
	channel = "redisson_lock__channel:{doc}"
	ownerA  = "a"
	ownerB  = "b"
)

func run(t *testing.T, rdb *redis.Client, s *redis.Script, keys []string, args ...any) (any, error) {
	t.Helper()
	return s.Run(context.Background(), rdb, keys, args...).Result()
}

func TestAcquireTakesReentersAndReportsTTL(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	ctx := context.Background()
	acquire := func(owner, req string, count int) (any, error) {
		return run(t, rdb, lua.Acquire, []string{lock, latch(req)}, 30000, owner, count, 10000)
	}
	if got, err := acquire(ownerA, "r1", 0); err != nil || got.(int64) != 0 {
		t.Fatalf("fresh acquire: %v %v, want 0", got, err)
	}
	// A resend of r1 (sent with the same count) is a no-op that still
	// reports success, and marks r1 so no later copy takes the lock again.
	if got, err := acquire(ownerA, "r1", 0); err != nil || got.(int64) != 0 {
		t.Fatalf("resend: %v %v", got, err)
	}
	if n, _ := rdb.HGet(ctx, lock, ownerA).Int(); n != 1 {
		t.Fatalf("count after resend = %d, want 1", n)
	}
	if got, err := acquire(ownerA, "r2", 1); err != nil || got.(int64) != 0 {
		t.Fatalf("re-entry: %v %v", got, err)
	}
	if n, _ := rdb.HGet(ctx, lock, ownerA).Int(); n != 2 {
		t.Fatalf("count after re-entry = %d, want 2", n)
	}
	ttl, err := acquire(ownerB, "r3", 0)
	if err != nil || ttl.(int64) <= 29000 {
		t.Fatalf("other owner: %v %v, want the holder's PTTL", ttl, err)
	}
	// A re-entry whose hold is gone is refused, not taken afresh.
	rdb.Del(ctx, lock)
	if got, err := acquire(ownerA, "r4", 2); err != nil || got.(int64) != -6 {
		t.Fatalf("re-entry of a gone hold: %v %v, want -6", got, err)
	}
	// A late copy of r1 after its hold ended does not take the lock.
	if got, err := acquire(ownerA, "r1", 0); err != nil || got.(int64) != -3 {
		t.Fatalf("late copy of a marked request: %v %v, want -3", got, err)
	}
	if n, _ := rdb.Exists(ctx, lock).Result(); n != 0 {
		t.Fatal("a late copy took the lock")
	}
}

func TestSettleAbortsARequestThatHasNotArrived(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	ctx := context.Background()
	settle := func(req string, count int) int64 {
		n, err := run(t, rdb, lua.Settle, []string{lock, latch(req)}, ownerA, count, 10000)
		if err != nil {
			t.Fatal(err)
		}
		return n.(int64)
	}
	if n := settle("r1", 0); n != 0 {
		t.Fatalf("settle before arrival = %v, want 0", n)
	}
	got, err := run(t, rdb, lua.Acquire, []string{lock, latch("r1")}, 30000, ownerA, 0, 10000)
	if err != nil || got.(int64) != -3 {
		t.Fatalf("late acquire = %v %v, want -3 (aborted)", got, err)
	}
	if n, _ := rdb.Exists(ctx, lock).Result(); n != 0 {
		t.Fatal("an aborted request took the lock")
	}
	if n := settle("r1", 0); n != 0 {
		t.Fatalf("settle resent = %v, want 0 again", n)
	}
	// Settling a request that did take the lock reports it, and a copy of
	// it arriving after the hold ended stays out.
	run(t, rdb, lua.Acquire, []string{lock, latch("r2")}, 30000, ownerA, 0, 10000)
	if n := settle("r2", 0); n != 1 {
		t.Fatalf("settle after success = %v, want 1", n)
	}
	rdb.Del(ctx, lock)
	if got, _ := run(t, rdb, lua.Acquire, []string{lock, latch("r2")}, 30000, ownerA, 0, 10000); got.(int64) != -3 {
		t.Fatalf("copy after the hold ended = %v, want -3", got)
	}
}

func TestMultiAcquireTakesAllOrNothingAndCountsOnce(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	ctx := context.Background()
	const a, b = "{m}a", "{m}b"
	marker := func(req string) string { return "lockgen_latch:{m}a:" + req }
	acquire := func(owner, req string, counts ...int) []any {
		args := []any{30000, owner, 10000}
		for _, n := range counts {
			args = append(args, n)
		}
		got, err := run(t, rdb, lua.MultiAcquire, []string{a, b, marker(req)}, args...)
		if err != nil {
			t.Fatal(err)
		}
		return got.([]any)
	}
	if got := acquire(ownerA, "r1", 0, 0); got[0].(int64) != 0 || got[1].(int64) != 0 {
		t.Fatalf("fresh multi acquire = %v, want {0, 0}", got)
	}
	if got := acquire(ownerA, "r1", 0, 0); got[0].(int64) != 0 || got[1].(int64) != 0 {
		t.Fatalf("resend = %v, want {0, 0}", got)
	}
	for _, k := range []string{a, b} {
		if n, _ := rdb.HGet(ctx, k, ownerA).Int(); n != 1 {
			t.Fatalf("%s count %d after a resend, want 1", k, n)
		}
	}
	if got := acquire(ownerB, "r2", 0, 0); got[0].(int64) != 1 || got[1].(int64) <= 0 {
		t.Fatalf("other owner = %v, want {1, ttl}", got)
	}
	if n, _ := rdb.Exists(ctx, "{m}a", "{m}b").Result(); n != 2 {
		t.Fatal("members vanished")
	}
	keys := []string{a, "redisson_lock__channel:{m}a", b, "redisson_lock__channel:{m}b"}
	for i := 0; i < 2; i++ { // the second run is a resend
		got, err := run(t, rdb, lua.MultiRelease, keys, 30000, ownerA, "publish", 1, 1)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 && (got.([]any)[0].(int64) != 1 || got.([]any)[1].(int64) != 1) {
			t.Fatalf("multi release = %v, want {1, 1}", got)
		}
	}
	if n, _ := rdb.Exists(ctx, a, b).Result(); n != 0 {
		t.Fatal("members left after the release")
	}
	// A late copy of r1 stays out: its marker says it ran.
	if got := acquire(ownerA, "r1", 0, 0); got[1].(int64) != -3 {
		t.Fatalf("late copy = %v, want {0, -3}", got)
	}
	if n, _ := rdb.Exists(ctx, a, b).Result(); n != 0 {
		t.Fatal("a late copy took the members")
	}
}

func TestReleaseCountsDownOnceAndPublishesOnLast(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	ctx := context.Background()
	sub := rdb.Subscribe(ctx, channel)
	defer sub.Close()
	sub.Receive(ctx)
	rdb.HSet(ctx, lock, ownerA, 2)
	keys := []string{lock, channel}
	if _, err := run(t, rdb, lua.Release, keys, 30000, ownerB, "publish", 1); !errors.Is(err, redis.Nil) {
		t.Fatalf("non-owner release: %v, want nil", err)
	}
	for i := 0; i < 2; i++ { // the second run is a resend: same count sent
		if n, _ := run(t, rdb, lua.Release, keys, 30000, ownerA, "publish", 2); n.(int64) != 0 {
			t.Fatalf("partial release = %v, want 0", n)
		}
	}
	if n, _ := rdb.HGet(ctx, lock, ownerA).Int(); n != 1 {
		t.Fatalf("count = %d after a resent partial release, want 1", n)
	}
	if ttl := rdb.PTTL(ctx, lock).Val(); ttl <= 29*time.Second {
		t.Fatalf("PTTL %v after a partial release, want the lease re-applied", ttl)
	}
	if n, _ := run(t, rdb, lua.Release, keys, 30000, ownerA, "publish", 1); n.(int64) != 1 {
		t.Fatalf("last release = %v, want 1", n)
	}
	if n, _ := rdb.Exists(ctx, lock).Result(); n != 0 {
		t.Fatal("lock left after the last release")
	}
	if _, err := run(t, rdb, lua.Release, keys, 30000, ownerA, "publish", 1); !errors.Is(err, redis.Nil) {
		t.Fatalf("resent last release: %v, want nil (the lock is gone)", err)
	}
	msg, err := sub.ReceiveMessage(ctx)
	if err != nil || msg.Payload != "0" {
		t.Fatalf("message %v %v", msg, err)
	}
	if keys, _ := rdb.Keys(ctx, "*").Result(); len(keys) != 0 {
		t.Fatalf("keys left: %v (a release writes no latch)", keys)
	}
}

func TestRenewBatchExtendsOnlyLiveHolds(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	ctx := context.Background()
	rdb.HSet(ctx, "k1", ownerA, 1)
	rdb.PExpire(ctx, "k1", 1000)
	rdb.HSet(ctx, "k2", ownerB, 1)
	got, err := run(t, rdb, lua.RenewBatch, []string{"k1", "k2", "k3"}, 30000, ownerA, 0, ownerA, 0, ownerA, 0)
	if err != nil {
		t.Fatal(err)
	}
	res := got.([]any)
	if res[0].(int64) != 1 || res[1].(int64) != 0 || res[2].(int64) != 0 {
		t.Fatalf("renew = %v, want [1 0 0]", res)
	}
	if ttl := rdb.PTTL(ctx, "k1").Val(); ttl.Milliseconds() < 29000 {
		t.Fatalf("k1 not extended: %v", ttl)
	}
	if ttl := rdb.PTTL(ctx, "k2").Val(); ttl != -1 {
		t.Fatalf("k2 (other owner) touched: %v", ttl)
	}
}

func TestForceUnlockDeletesAndPublishes(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	ctx := context.Background()
	rdb.HSet(ctx, lock, ownerB, 3)
	if n, _ := run(t, rdb, lua.ForceUnlock, []string{lock, channel}, "0", "publish"); n.(int64) != 1 {
		t.Fatalf("force unlock = %v, want 1", n)
	}
	if n, _ := run(t, rdb, lua.ForceUnlock, []string{lock, channel}, "0", "publish"); n.(int64) != 0 {
		t.Fatalf("force unlock of nothing = %v, want 0", n)
	}
}
