package lua_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/lua"
)

// The synchronizers' scripts, their documented return values one by one.

func TestFencedAcquireCountsTokensOncePerAcquisition(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	ctx := context.Background()
	token := "redisson_lock_token:{doc}"
	acquire := func(owner, req string, count int) []int64 {
		t.Helper()
		res, err := lua.FencedAcquire.Run(ctx, rdb, []string{lock, latch(req), token}, 30000, owner, count, 10000).Int64Slice()
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if got := acquire(ownerA, "r1", 0); len(got) != 2 || got[0] != 0 || got[1] != 1 {
		t.Fatalf("fresh acquire: %v, want {0, 1}", got)
	}
	// A resend of r1 counts neither the hold nor the token again.
	if got := acquire(ownerA, "r1", 0); len(got) != 2 || got[1] != 1 {
		t.Fatalf("resend: %v, want {0, 1}", got)
	}
	if got := acquire(ownerA, "r2", 1); len(got) != 2 || got[1] != 2 {
		t.Fatalf("re-entry: %v, want {0, 2}", got)
	}
	if got := acquire(ownerB, "r3", 0); len(got) != 1 || got[0] <= 29000 {
		t.Fatalf("other owner: %v, want {the holder's PTTL}", got)
	}
	if ttl := rdb.PTTL(ctx, token).Val(); ttl != -1 {
		t.Fatalf("token TTL %v, want none", ttl)
	}
	rdb.Del(ctx, lock)
	if got := acquire(ownerA, "r4", 2); len(got) != 1 || got[0] != -6 {
		t.Fatalf("re-entry of a gone hold: %v, want {-6}", got)
	}
	if got := acquire(ownerB, "r5", 0); len(got) != 2 || got[1] != 3 {
		t.Fatalf("next owner: %v, want {0, 3}: the counter is never reset", got)
	}
}

const (
	sem      = "sem"
	semZ     = "{sem}:timeout"
	semChan  = "redisson_sc:{sem}"
	semMark  = "lockgen_latch:{sem}:m1"
	idA      = "aaaaaaaaaaaaaaaa"
	idB      = "bbbbbbbbbbbbbbbb"
	neverEnd = 922337203685477
)

func semAcquire(t *testing.T, rdb *redis.Client, marker string, lease, permits int, ids string) int64 {
	t.Helper()
	n, err := lua.SemaphoreAcquire.Run(context.Background(), rdb, []string{sem, semZ, semChan, marker}, lease, "publish", permits, ids).Int64()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestSemaphoreAcquireArmsTakesWaitsAndReclaims(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	ctx := context.Background()
	// Not armed and no permits to arm with: nothing to take, no expiry.
	if got := semAcquire(t, rdb, semMark, 1000, 0, idA); got != -1 {
		t.Fatalf("unarmed: %d, want -1", got)
	}
	// Armed with 1 by the first acquire, which takes it.
	if got := semAcquire(t, rdb, semMark, 1000, 1, idA); got != 0 {
		t.Fatalf("first acquire: %d, want 0", got)
	}
	if v := rdb.Get(ctx, sem).Val(); v != "0" {
		t.Fatalf("free count %q, want 0", v)
	}
	// A resend of the same request changes nothing.
	if got := semAcquire(t, rdb, semMark, 1000, 1, idA); got != 0 || rdb.Get(ctx, sem).Val() != "0" || rdb.ZCard(ctx, semZ).Val() != 1 {
		t.Fatalf("resend: %d, count %s", got, rdb.Get(ctx, sem).Val())
	}
	// Full: the reply is the time to the nearest expiry.
	if got := semAcquire(t, rdb, "lockgen_latch:{sem}:m2", 1000, 1, idB); got < 1 || got > 1000 {
		t.Fatalf("full: %d, want the ms to the nearest expiry", got)
	}
	// An expired permit is reclaimed (and announced) before the next try.
	sub := rdb.Subscribe(ctx, semChan)
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	rdb.ZAdd(ctx, semZ, redis.Z{Score: 1, Member: idA})
	if got := semAcquire(t, rdb, "lockgen_latch:{sem}:m2", 1000, 1, idB); got != 0 {
		t.Fatalf("after the holder's permit expired: %d, want 0", got)
	}
	if msg, err := sub.ReceiveMessage(ctx); err != nil || msg.Payload != "1" {
		t.Fatalf("reclaim message %v %v, want \"1\"", msg, err)
	}
	// A permit that never expires gives a waiter no time to retry at.
	rdb.ZAdd(ctx, semZ, redis.Z{Score: neverEnd, Member: idB})
	if got := semAcquire(t, rdb, "lockgen_latch:{sem}:m3", 1000, 1, "cccccccccccccccc"); got != -1 {
		t.Fatalf("only never-expiring permits held: %d, want -1", got)
	}
}

func TestSemaphoreReleaseIsIdempotentAndSettleAborts(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	ctx := context.Background()
	semAcquire(t, rdb, semMark, 10000, 2, idA+idB)
	release := func() int64 {
		n, err := lua.SemaphoreRelease.Run(ctx, rdb, []string{sem, semZ, semChan, semMark}, "publish", idA+idB, 10000).Int64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if got := release(); got != 2 {
		t.Fatalf("release: %d, want 2", got)
	}
	if got := release(); got != 0 || rdb.Get(ctx, sem).Val() != "2" {
		t.Fatalf("resent release: %d, count %s; want 0 and 2", got, rdb.Get(ctx, sem).Val())
	}
	// A late copy of the released acquisition takes nothing.
	if got := semAcquire(t, rdb, semMark, 10000, 2, idA+idB); got != -3 {
		t.Fatalf("late copy after the release: %d, want -3", got)
	}
	settle := func(marker, id string) int64 {
		n, err := lua.SemaphoreSettle.Run(ctx, rdb, []string{semZ, marker}, id, 10000).Int64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if got := settle("lockgen_latch:{sem}:m9", "dddddddddddddddd"); got != 0 {
		t.Fatalf("settle of an attempt that never ran: %d, want 0", got)
	}
	if got := semAcquire(t, rdb, "lockgen_latch:{sem}:m9", 10000, 2, "dddddddddddddddd"); got != -3 {
		t.Fatalf("the settled attempt arriving late: %d, want -3", got)
	}
	semAcquire(t, rdb, "lockgen_latch:{sem}:m10", 10000, 2, "eeeeeeeeeeeeeeee")
	if got := settle("lockgen_latch:{sem}:m10", "eeeeeeeeeeeeeeee"); got != 1 {
		t.Fatalf("settle of an attempt that took: %d, want 1", got)
	}
}

func TestRenewBatchExtendsPermitsButNeverRevivesOne(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	ctx := context.Background()
	semAcquire(t, rdb, semMark, 1000, 2, idA+idB)
	renew := func(ids string) string {
		res, err := lua.RenewBatch.Run(ctx, rdb, []string{semZ}, 60000, "x", ids, -1).Text()
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	before := rdb.ZScore(ctx, semZ, idA).Val()
	if got := renew(idA + idB); got != "1" {
		t.Fatalf("renewal: %q, want 1", got)
	}
	after := rdb.ZScore(ctx, semZ, idA).Val()
	if after < before+58000 {
		t.Fatalf("score %v after renewal, was %v: want about 59 s later", after, before)
	}
	// A shorter lease never lowers a score.
	if res, _ := lua.RenewBatch.Run(ctx, rdb, []string{semZ}, 1000, "x", idA, -1).Text(); res != "1" || rdb.ZScore(ctx, semZ, idA).Val() != after {
		t.Fatal("a shorter renewal lowered the score")
	}
	// A permit whose score has passed is gone, even before a reclaim.
	rdb.ZAdd(ctx, semZ, redis.Z{Score: 1, Member: idB})
	if got := renew(idA + idB); got != "0" || rdb.ZScore(ctx, semZ, idB).Val() != 1 {
		t.Fatalf("renewal of an expired permit: %q, score %v; want 0 and untouched", got, rdb.ZScore(ctx, semZ, idB).Val())
	}
}

// Under maxmemory with noeviction Redis refuses a script's ZADD (it may
// grow memory) while the script has written nothing, and lets PEXPIRE
// through: a permit hold first in a call is answered "2" (held, not
// renewed: the watchdog tries again), and the lock hashes after it are
// renewed. The raised refusal ended the call, none of its holds renewed.
func TestRenewBatchUnderOOMRenewsTheHashesAndRetriesThePermits(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	ctx := context.Background()
	semAcquire(t, rdb, semMark, 1000, 2, idA)
	rdb.HSet(ctx, "k1", ownerA, 1)
	rdb.PExpire(ctx, "k1", 10*time.Second)
	if err := rdb.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.ConfigSet(context.Background(), "maxmemory", "0") })
	before := rdb.ZScore(ctx, semZ, idA).Val()
	got, err := lua.RenewBatch.Run(ctx, rdb, []string{semZ, "k1"}, 60000, "x", idA, -1, ownerA, 0).Text()
	if err != nil || got != "21" {
		t.Fatalf("renewal under OOM = %q %v, want 21", got, err)
	}
	if after := rdb.ZScore(ctx, semZ, idA).Val(); after != before {
		t.Fatalf("the permit's score moved from %v to %v", before, after)
	}
	if ttl := rdb.PTTL(ctx, "k1").Val(); ttl < 59*time.Second {
		t.Fatalf("k1 not renewed: %v", ttl)
	}
}

func TestLatchScriptsArmOnceAndReleaseAtZero(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	ctx := context.Background()
	keys := []string{"latch", "redisson_countdownlatch__channel__{latch}"}
	sub := rdb.Subscribe(ctx, keys[1])
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	next := func() string {
		msg, err := sub.ReceiveMessage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return msg.Payload
	}
	if n, _ := lua.LatchCountDown.Run(ctx, rdb, keys, "publish").Int64(); n != -1 || rdb.Exists(ctx, "latch").Val() != 0 {
		t.Fatalf("count-down of an unarmed latch: %d, and it must stay absent", n)
	}
	if n, _ := lua.LatchTrySet.Run(ctx, rdb, keys, 2, "publish").Int64(); n != 1 || next() != "1" {
		t.Fatal("trySetCount did not arm and announce")
	}
	if n, _ := lua.LatchTrySet.Run(ctx, rdb, keys, 5, "publish").Int64(); n != 0 || rdb.Get(ctx, "latch").Val() != "2" {
		t.Fatal("trySetCount overwrote an armed latch")
	}
	if n, _ := lua.LatchCountDown.Run(ctx, rdb, keys, "publish").Int64(); n != 1 {
		t.Fatalf("first count-down: %d", n)
	}
	if n, _ := lua.LatchCountDown.Run(ctx, rdb, keys, "publish").Int64(); n != 0 || next() != "0" || rdb.Exists(ctx, "latch").Val() != 0 {
		t.Fatal("the last count-down must delete the latch and publish 0")
	}
	lua.LatchTrySet.Run(ctx, rdb, keys, 1, "publish")
	next()
	if n, _ := lua.LatchDelete.Run(ctx, rdb, keys, "publish").Int64(); n != 1 || next() != "1" {
		t.Fatal("delete must publish 1")
	}
}
