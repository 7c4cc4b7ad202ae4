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
	if got, err := run(t, rdb, lua.Acquire, []string{lock, latch("r1")}, 30000, ownerA, "r1", 10000); err != nil || got.(int64) != 0 {
		t.Fatalf("fresh acquire: %v %v, want 0", got, err)
	}
	// A resend of r1 is a no-op that still reports success.
	if got, err := run(t, rdb, lua.Acquire, []string{lock, latch("r1")}, 30000, ownerA, "r1", 10000); err != nil || got.(int64) != 0 {
		t.Fatalf("resend: %v %v", got, err)
	}
	if n, _ := rdb.HGet(ctx, lock, ownerA).Int(); n != 1 {
		t.Fatalf("count after resend = %d, want 1", n)
	}
	if got, err := run(t, rdb, lua.Acquire, []string{lock, latch("r2")}, 30000, ownerA, "r2", 10000); err != nil || got.(int64) != 0 {
		t.Fatalf("re-entry: %v %v", got, err)
	}
	if n, _ := rdb.HGet(ctx, lock, ownerA).Int(); n != 2 {
		t.Fatalf("count after re-entry = %d, want 2", n)
	}
	ttl, err := run(t, rdb, lua.Acquire, []string{lock, latch("r3")}, 30000, ownerB, "r3", 10000)
	if err != nil || ttl.(int64) <= 29000 {
		t.Fatalf("other owner: %v %v, want the holder's PTTL", ttl, err)
	}
}

func TestSettleAbortsARequestThatHasNotArrived(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	if n, _ := run(t, rdb, lua.Settle, []string{latch("r1")}, "r1", 10000); n.(int64) != 0 {
		t.Fatalf("settle before arrival = %v, want 0", n)
	}
	got, err := run(t, rdb, lua.Acquire, []string{lock, latch("r1")}, 30000, ownerA, "r1", 10000)
	if err != nil || got.(int64) != -3 {
		t.Fatalf("late acquire = %v %v, want -3 (aborted)", got, err)
	}
	if n, _ := rdb.Exists(context.Background(), lock).Result(); n != 0 {
		t.Fatal("an aborted request took the lock")
	}
	// Settling a request that did take the lock reports it.
	run(t, rdb, lua.Acquire, []string{lock, latch("r2")}, 30000, ownerA, "r2", 10000)
	if n, _ := run(t, rdb, lua.Settle, []string{latch("r2")}, "r2", 10000); n.(int64) != 1 {
		t.Fatalf("settle after success = %v, want 1", n)
	}
}

func TestReleaseCountsDownOnceAndPublishesOnLast(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	ctx := context.Background()
	sub := rdb.Subscribe(ctx, channel)
	defer sub.Close()
	sub.Receive(ctx)
	rdb.HSet(ctx, lock, ownerA, 2)
	keys := func(req string) []string { return []string{lock, channel, latch(req)} }
	if _, err := run(t, rdb, lua.Release, keys("u0"), "0", 30000, ownerB, "publish", 10000, "u0"); !errors.Is(err, redis.Nil) {
		t.Fatalf("non-owner release: %v, want nil", err)
	}
	for i := 0; i < 2; i++ { // the second run is a resend of u1
		if n, _ := run(t, rdb, lua.Release, keys("u1"), "0", 30000, ownerA, "publish", 10000, "u1"); n.(int64) != 0 {
			t.Fatalf("partial release = %v, want 0", n)
		}
	}
	if n, _ := rdb.HGet(ctx, lock, ownerA).Int(); n != 1 {
		t.Fatalf("count = %d after a resent partial release, want 1", n)
	}
	for i := 0; i < 2; i++ {
		if n, _ := run(t, rdb, lua.Release, keys("u2"), "0", 30000, ownerA, "publish", 10000, "u2"); n.(int64) != 1 {
			t.Fatalf("last release = %v, want 1", n)
		}
	}
	if n, _ := rdb.Exists(ctx, lock).Result(); n != 0 {
		t.Fatal("lock left after the last release")
	}
	if ttl := rdb.PTTL(ctx, latch("u2")).Val(); ttl <= 0 || ttl > 10*time.Second {
		t.Fatalf("request latch PTTL %v after the last release, want it to expire within 10s", ttl)
	}
	msg, err := sub.ReceiveMessage(ctx)
	if err != nil || msg.Payload != "0" {
		t.Fatalf("message %v %v", msg, err)
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
