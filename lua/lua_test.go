package lua_test

import (
	"context"
	"errors"
	"strconv"
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

	// A fair lock's keys beside lock.
	fairQueue    = "redisson_lock_queue:{doc}"
	fairTimeouts = "redisson_lock_timeout:{doc}"
	fairWaiters  = "lockgen_fair_waiters:{doc}"
	fairGrants   = "lockgen_fair_grants:{doc}"
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
	// 10 s, below the 30 s renewal: at 1 s a full run beside other work
	// (load 4) let k1 expire before the script ran (renew = 00011).
	rdb.PExpire(ctx, "k1", 10*time.Second)
	rdb.HSet(ctx, "k2", ownerB, 1)
	rdb.HSet(ctx, "k4", ownerA, 1)
	rdb.PExpire(ctx, "k4", time.Minute)
	rdb.HSet(ctx, "k5", ownerA, 1)
	got, err := run(t, rdb, lua.RenewBatch, []string{"k1", "k2", "k3", "k4", "k5"}, 30000, "", ownerA, ownerA, ownerA, ownerA, ownerA)
	if err != nil || got != "10011" {
		t.Fatalf("renew = %v %v, want 10011", got, err)
	}
	if ttl := rdb.PTTL(ctx, "k1").Val(); ttl.Milliseconds() < 29000 {
		t.Fatalf("k1 not extended: %v", ttl)
	}
	if ttl := rdb.PTTL(ctx, "k2").Val(); ttl != -1 {
		t.Fatalf("k2 (other owner) touched: %v", ttl)
	}
	if ttl := rdb.PTTL(ctx, "k4").Val(); ttl < 59*time.Second {
		t.Fatalf("k4's longer lease cut short: %v", ttl)
	}
	if ttl := rdb.PTTL(ctx, "k5").Val(); ttl != -1 {
		t.Fatalf("k5 (no TTL) given one: %v", ttl)
	}
	// The paired layout ("x": field, extra keys) of the same holds.
	got, err = run(t, rdb, lua.RenewBatch, []string{"k1", "k2"}, 30000, "x", ownerA, 0, ownerA, 0)
	if err != nil || got != "10" {
		t.Fatalf("renew (paired) = %v %v, want 10", got, err)
	}
}

// A hold's key of another type (the lock deleted and the key written by
// someone else) is a hold gone, and the other holds of the call are
// renewed: a WRONGTYPE raised for one key used to end the call with none
// renewed, every round, until all holds sent with it were lost.
func TestRenewBatchAnswersGoneForAKeyOfAnotherType(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	ctx := context.Background()
	for _, k := range []string{"k1", "k3"} {
		rdb.HSet(ctx, k, ownerA, 1)
		rdb.PExpire(ctx, k, 10*time.Second)
	}
	rdb.Set(ctx, "str", "not a lock", 0)
	rdb.RPush(ctx, "list", "not a semaphore")
	for _, c := range []struct {
		layout string
		keys   []string
		args   []any
		want   string
	}{
		{"", []string{"k1", "str", "k3"}, []any{ownerA, ownerA, ownerA}, "101"},
		{"x", []string{"k1", "str", "k3"}, []any{ownerA, 0, ownerA, 0, ownerA, 0}, "101"},
		{"x", []string{"k1", "list", "k3"}, []any{ownerA, 0, "0123456789abcdef", -1, ownerA, 0}, "101"},
	} {
		got, err := run(t, rdb, lua.RenewBatch, c.keys, append([]any{30000, c.layout}, c.args...)...)
		if err != nil || got != c.want {
			t.Fatalf("renew %v (layout %q) = %v %v, want %s", c.keys, c.layout, got, err, c.want)
		}
		if ttl := rdb.PTTL(ctx, "k3").Val(); ttl < 29*time.Second {
			t.Fatalf("k3, after the key of another type, not extended: %v", ttl)
		}
		rdb.PExpire(ctx, "k3", 10*time.Second)
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

// An acquireScript drives one acquire script (or one shape of one) through
// the hold-count rule of count.lua, so one table of cases covers them all.
type acquireScript struct {
	name   string
	hashes []string // the lock hashes a request takes (a multi-lock's members)
	field  func(owner string) string
	// send runs one request of owner with request id req, the owner's
	// hold count before it and a lease, and returns its reply code (a
	// multi-lock's {i, code} reduced to code).
	send func(t *testing.T, rdb *redis.Client, owner, req string, expected, lease int) int64
	// timeoutKey is the extra key of the owner's hold n that carries the
	// hold's lease (read holds), or "".
	timeoutKey func(owner string, n int) string
}

// int64Reply returns a func that fails t on an error reply and returns
// an integer reply.
func int64Reply(t *testing.T) func(any, error) int64 {
	return func(got any, err error) int64 {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return got.(int64)
	}
}

func multiScript(name string, hashes ...string) acquireScript {
	return acquireScript{
		name:   name,
		hashes: hashes,
		field:  func(owner string) string { return owner },
		send: func(t *testing.T, rdb *redis.Client, owner, req string, expected, lease int) int64 {
			keys := append(append([]string(nil), hashes...), "lockgen_latch:{doc}:"+req)
			args := []any{lease, owner, 10000}
			for range hashes {
				args = append(args, expected)
			}
			got, err := run(t, rdb, lua.MultiAcquire, keys, args...)
			if err != nil {
				t.Fatal(err)
			}
			return got.([]any)[1].(int64)
		},
	}
}

var acquireScripts = []acquireScript{
	{
		name: "reentrant", hashes: []string{lock},
		field: func(owner string) string { return owner },
		send: func(t *testing.T, rdb *redis.Client, owner, req string, expected, lease int) int64 {
			return int64Reply(t)(run(t, rdb, lua.Acquire, []string{lock, latch(req)}, lease, owner, expected, 10000))
		},
	},
	{
		name: "fair", hashes: []string{lock},
		field: func(owner string) string { return owner },
		send: func(t *testing.T, rdb *redis.Client, owner, req string, expected, lease int) int64 {
			keys := []string{lock, "redisson_lock_queue:{doc}", "redisson_lock_timeout:{doc}", latch(req), "lockgen_fair_waiters:{doc}", "lockgen_fair_grants:{doc}"}
			return int64Reply(t)(run(t, rdb, lua.FairAcquire, keys, lease, owner, 300000, expected, 10000, "1", channel, "publish", "0"))
		},
	},
	{
		name: "read", hashes: []string{lock},
		field: func(owner string) string { return owner },
		send: func(t *testing.T, rdb *redis.Client, owner, req string, expected, lease int) int64 {
			keys := []string{lock, readTimeoutKey(owner, expected+1), latch(req), "lockgen_rwlock_writers:{doc}"}
			return int64Reply(t)(run(t, rdb, lua.ReadAcquire, keys, lease, owner, owner+":write", expected, 10000, "0"))
		},
		timeoutKey: readTimeoutKey,
	},
	{
		name: "write", hashes: []string{lock},
		field: func(owner string) string { return owner + ":write" },
		send: func(t *testing.T, rdb *redis.Client, owner, req string, expected, lease int) int64 {
			keys := []string{lock, latch(req), "lockgen_rwlock_writers:{doc}"}
			return int64Reply(t)(run(t, rdb, lua.WriteAcquire, keys, lease, owner+":write", owner, expected, 10000, "0", 3000))
		},
	},
	multiScript("multi of one", lock),
	multiScript("multi of two", "{doc}a", "{doc}b"),
}

func readTimeoutKey(owner string, n int) string {
	return "{doc}:" + owner + ":rwlock_timeout:" + strconv.Itoa(n)
}

// Every acquire script applies the one hold-count rule of count.lua.
func TestAcquireScriptsShareTheHoldCountRule(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	ctx := context.Background()
	type env struct {
		t *testing.T
		s acquireScript
	}
	// send sends a request and fails unless its reply is want.
	send := func(e env, owner, req string, expected, lease int, want int64) {
		e.t.Helper()
		if got := e.s.send(e.t, rdb, owner, req, expected, lease); got != want {
			e.t.Fatalf("%s request %s (expected count %d, lease %d) = %d, want %d", owner, req, expected, lease, got, want)
		}
	}
	// count fails unless owner holds every hash want times.
	count := func(e env, owner string, want int) {
		e.t.Helper()
		for _, h := range e.s.hashes {
			got, err := rdb.HGet(ctx, h, e.s.field(owner)).Int()
			if errors.Is(err, redis.Nil) {
				got, err = 0, nil
			}
			if err != nil || got != want {
				e.t.Fatalf("%s count on %s = %d %v, want %d", owner, h, got, err, want)
			}
		}
	}
	// ttl fails unless every hash (and the timeout key of owner's hold n,
	// if n > 0 and the script has one) has a PTTL in [lo, hi] ms.
	ttl := func(e env, owner string, n int, lo, hi int64) {
		e.t.Helper()
		keys := append([]string(nil), e.s.hashes...)
		if e.s.timeoutKey != nil && n > 0 {
			keys = append(keys, e.s.timeoutKey(owner, n))
		}
		for _, k := range keys {
			if got := rdb.PTTL(ctx, k).Val().Milliseconds(); got < lo || got > hi {
				e.t.Fatalf("PTTL of %s = %d ms, want in [%d, %d]", k, got, lo, hi)
			}
		}
	}
	gone := func(e env) {
		e.t.Helper()
		if n := rdb.Exists(ctx, e.s.hashes...).Val(); n != 0 {
			e.t.Fatalf("%d lock hashes exist, want none: %v", n, rdb.Keys(ctx, "*").Val())
		}
	}
	cases := []struct {
		name string
		run  func(e env)
	}{
		{"fresh take", func(e env) {
			send(e, ownerA, "r1", 0, 30000, 0)
			count(e, ownerA, 1)
			ttl(e, ownerA, 1, 29000, 30000)
		}},
		{"resend of a fresh take", func(e env) {
			send(e, ownerA, "r1", 0, 30000, 0)
			send(e, ownerA, "r1", 0, 30000, 0)
			count(e, ownerA, 1)
		}},
		{"re-entry", func(e env) {
			send(e, ownerA, "r1", 0, 30000, 0)
			send(e, ownerA, "r2", 1, 30000, 0)
			count(e, ownerA, 2)
			ttl(e, ownerA, 2, 29000, 30000)
		}},
		{"resend of a re-entry", func(e env) {
			send(e, ownerA, "r1", 0, 30000, 0)
			send(e, ownerA, "r2", 1, 30000, 0)
			send(e, ownerA, "r2", 1, 30000, 0)
			count(e, ownerA, 2)
		}},
		{"re-entry of a gone hold", func(e env) {
			send(e, ownerA, "r1", 0, 30000, 0)
			rdb.Del(ctx, e.s.hashes...)
			send(e, ownerA, "r2", 1, 30000, -6)
			gone(e)
		}},
		{"re-entry of a hold another owner took and released meanwhile", func(e env) {
			send(e, ownerA, "r1", 0, 30000, 0)
			rdb.Del(ctx, e.s.hashes...)
			send(e, ownerB, "r2", 0, 30000, 0)
			rdb.Del(ctx, e.s.hashes...) // B's release
			send(e, ownerA, "r3", 1, 30000, -6)
			gone(e)
		}},
		{"stale expected count", func(e env) {
			send(e, ownerA, "r1", 0, 30000, 0)
			send(e, ownerA, "r2", 2, 30000, -6)
			count(e, ownerA, 1)
		}},
		{"settled-as-aborted marker", func(e env) {
			rdb.Set(ctx, latch("r1"), "abort", 10*time.Second)
			send(e, ownerA, "r1", 0, 30000, -3)
			gone(e)
			send(e, ownerA, "r2", 0, 30000, 0)
			rdb.Set(ctx, latch("r3"), "abort", 10*time.Second)
			send(e, ownerA, "r3", 1, 30000, -3)
			count(e, ownerA, 1)
		}},
		{"late copy of a request whose hold ended", func(e env) {
			send(e, ownerA, "r1", 0, 30000, 0)
			send(e, ownerA, "r1", 0, 30000, 0) // a resend marks r1 as done
			rdb.Del(ctx, e.s.hashes...)
			send(e, ownerA, "r1", 0, 30000, -3)
			gone(e)
		}},
		{"TTL never shortened by a re-entry or resend with a shorter lease", func(e env) {
			send(e, ownerA, "r1", 0, 30000, 0)
			send(e, ownerA, "r1", 0, 1000, 0)
			ttl(e, ownerA, 1, 29000, 30000)
			send(e, ownerA, "r2", 1, 1000, 0)
			send(e, ownerA, "r2", 1, 1000, 0)
			count(e, ownerA, 2)
			ttl(e, ownerA, 1, 29000, 30000)
		}},
		{"TTL lengthened by a resend with a longer lease", func(e env) {
			send(e, ownerA, "r1", 0, 5000, 0)
			send(e, ownerA, "r1", 0, 30000, 0)
			count(e, ownerA, 1)
			ttl(e, ownerA, 1, 29000, 30000)
			send(e, ownerA, "r2", 1, 5000, 0)
			send(e, ownerA, "r2", 1, 60000, 0)
			count(e, ownerA, 2)
			ttl(e, ownerA, 2, 59000, 60000)
		}},
	}
	for _, s := range acquireScripts {
		t.Run(s.name, func(t *testing.T) {
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					rdb.FlushAll(ctx)
					c.run(env{t, s})
				})
			}
		})
	}
}

// readRelease drops owner's read hold number expected of the test lock.
func readRelease(t *testing.T, rdb *redis.Client, owner string, expected int) (any, error) {
	keys := []string{lock, "redisson_rwlock:{doc}", readTimeoutKey(owner, expected), "{doc}"}
	return run(t, rdb, lua.ReadRelease, keys, owner, "publish", expected)
}

// readHold gives owner read hold n of the test lock with a timeout key of
// lease ms, as a reader (lockgen's or Redisson's) that took it looks.
func readHold(rdb *redis.Client, owner string, n int, lease time.Duration) {
	ctx := context.Background()
	rdb.HSetNX(ctx, lock, "mode", "read")
	rdb.HSet(ctx, lock, owner, n)
	rdb.Set(ctx, readTimeoutKey(owner, n), n, lease)
}

// A read release sets the lock's TTL to the longest TTL left among the
// readers' timeout keys, and frees the lock when none is alive (Redisson's
// read unlock), but never cuts what a write hold or the releasing owner's
// remaining holds count on.
func TestReadReleaseRecomputesTheTTLFromLiveReaders(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	ctx := context.Background()
	const java = "6a1ee0b4-0000-4000-8000-000000000000:1" // a crashed Redisson reader
	pttl := func(k string) time.Duration { return rdb.PTTL(ctx, k).Val() }
	release := func(owner string, expected int, want int64) {
		t.Helper()
		got, err := readRelease(t, rdb, owner, expected)
		if err != nil || got.(int64) != want {
			t.Fatalf("read release of %s (count %d) = %v %v, want %d", owner, expected, got, err, want)
		}
	}

	t.Run("a dead reader's field does not keep the lock", func(t *testing.T) {
		rdb.FlushAll(ctx)
		readHold(rdb, java, 1, 300*time.Millisecond)
		readHold(rdb, ownerA, 1, 30*time.Second)
		rdb.PExpire(ctx, lock, 30*time.Second)
		release(ownerA, 1, 0)
		if d := pttl(lock); d <= 0 || d > 300*time.Millisecond {
			t.Fatalf("PTTL %v after the release, want the dead reader's last <= 300ms", d)
		}
		readHold(rdb, ownerA, 1, 30*time.Second)
		rdb.PExpire(ctx, lock, 30*time.Second)
		sub := rdb.Subscribe(ctx, "redisson_rwlock:{doc}")
		defer sub.Close()
		sub.Receive(ctx)
		rdb.Del(ctx, readTimeoutKey(java, 1)) // its lease ran out
		release(ownerA, 1, 1)
		if n := rdb.Exists(ctx, lock).Val(); n != 0 {
			t.Fatal("lock left with no live reader")
		}
		if msg, err := sub.ReceiveMessage(ctx); err != nil || msg.Payload != "0" {
			t.Fatalf("message %v %v, want 0", msg, err)
		}
	})
	t.Run("a live reader keeps the lock for its lease", func(t *testing.T) {
		rdb.FlushAll(ctx)
		readHold(rdb, ownerB, 1, 20*time.Second)
		readHold(rdb, ownerA, 1, 30*time.Second)
		rdb.PExpire(ctx, lock, 30*time.Second)
		release(ownerA, 1, 0)
		if d := pttl(lock); d < 19*time.Second || d > 20*time.Second {
			t.Fatalf("PTTL %v, want B's ~20s", d)
		}
	})
	t.Run("a write hold's TTL is never cut", func(t *testing.T) {
		rdb.FlushAll(ctx)
		rdb.HSet(ctx, lock, "mode", "write", ownerA+":write", 1, ownerA, 1)
		rdb.Set(ctx, readTimeoutKey(ownerA, 1), 1, time.Second)
		rdb.PExpire(ctx, lock, 30*time.Second)
		release(ownerA, 1, 0)
		if d := pttl(lock); d < 29*time.Second {
			t.Fatalf("PTTL %v with the write hold left, want its 30s", d)
		}
		if rdb.HGet(ctx, lock, "mode").Val() != "write" {
			t.Fatal("mode changed")
		}
	})
	t.Run("the owner's remaining hold keeps its longest lease", func(t *testing.T) {
		rdb.FlushAll(ctx)
		readHold(rdb, ownerA, 1, 5*time.Second)
		readHold(rdb, ownerA, 2, 60*time.Second)
		rdb.PExpire(ctx, lock, 60*time.Second)
		release(ownerA, 2, 0)
		release(ownerA, 2, 0) // a resend counts down once
		if n, _ := rdb.HGet(ctx, lock, ownerA).Int(); n != 1 {
			t.Fatalf("count %d, want 1", n)
		}
		if d := pttl(lock); d < 59*time.Second {
			t.Fatalf("PTTL %v, want the 60s a hold of the owner counts on", d)
		}
		if d := pttl(readTimeoutKey(ownerA, 1)); d < 59*time.Second {
			t.Fatalf("remaining hold's timeout key PTTL %v, want 60s", d)
		}
		release(ownerA, 1, 1)
		if keys := rdb.Keys(ctx, "*").Val(); len(keys) != 0 {
			t.Fatalf("keys left: %v", keys)
		}
	})
}

// A renewal never shortens a read hold's timeout keys: a read release
// recomputes the lock's TTL from them, so they carry what the hold counts
// on (an outer fixed lease longer than the watchdog's, say).
func TestRenewBatchNeverShortensTimeoutKeys(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	ctx := context.Background()
	readHold(rdb, ownerA, 1, 60*time.Second)
	readHold(rdb, ownerA, 2, time.Second)
	rdb.PExpire(ctx, lock, 60*time.Second)
	keys := []string{lock, readTimeoutKey(ownerA, 1), readTimeoutKey(ownerA, 2), readTimeoutKey(ownerA, 3)}
	got, err := run(t, rdb, lua.RenewBatch, keys, 30000, "x", ownerA, 3)
	if err != nil || got != "1" {
		t.Fatalf("renew = %v %v, want 1", got, err)
	}
	if d := rdb.PTTL(ctx, keys[1]).Val(); d < 59*time.Second {
		t.Fatalf("hold 1's key PTTL %v, want its 60s kept", d)
	}
	if d := rdb.PTTL(ctx, keys[2]).Val(); d < 29*time.Second || d > 30*time.Second {
		t.Fatalf("hold 2's key PTTL %v, want the 30s lease", d)
	}
	if n := rdb.Exists(ctx, keys[3]).Val(); n != 0 {
		t.Fatal("a renewal revived a timeout key that was gone")
	}
}

// A fair waiter's score: its own liveness deadline in a queue of lockgen
// waiters, raised by one queue timeout per Redisson waiter ahead of it
// (each of their acquisitions lowers every score behind by their wait
// timeout), never lowered by a refresh; a lockgen waiter popped by a
// Redisson client while alive is re-enqueued and told to look again soon.
func TestFairAcquireScoresSurviveRedissonsArithmetic(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	ctx := context.Background()
	const (
		qt = 300000
	)
	try := func(owner string) int64 {
		t.Helper()
		keys := []string{lock, fairQueue, fairTimeouts, latch(owner), fairWaiters, fairGrants}
		got, err := run(t, rdb, lua.FairAcquire, keys, 30000, owner, qt, 0, 10000, "1", channel, "publish", "0")
		if err != nil {
			t.Fatal(err)
		}
		return got.(int64)
	}
	now := func() float64 { return float64(time.Now().UnixMilli()) }
	score := func(owner string, lo, hi float64) {
		t.Helper()
		got := rdb.ZScore(ctx, fairTimeouts, owner).Val()
		if n := now(); got < n+lo || got > n+hi {
			t.Fatalf("%s's score is now%+.0f ms, want now+[%.0f, %.0f]", owner, got-n, lo, hi)
		}
	}

	rdb.HSet(ctx, lock, "holder", 1)
	rdb.PExpire(ctx, lock, 30*time.Second)
	try("g1")
	try("g2")
	score("g1", qt-1000, qt+1000)
	score("g2", qt-1000, qt+1000) // lockgen waiters ahead do not count

	// A Redisson waiter joins with its chain score; a lockgen waiter
	// behind it gets one queue timeout more.
	rdb.RPush(ctx, fairQueue, "java")
	rdb.ZAdd(ctx, fairTimeouts, redis.Z{Score: rdb.ZScore(ctx, fairTimeouts, "g2").Val() + qt, Member: "java"})
	try("g3")
	score("g3", 2*qt-1000, 2*qt+1000)

	// A refresh never lowers a score.
	rdb.ZAdd(ctx, fairTimeouts, redis.Z{Score: now() + 5*qt, Member: "g1"})
	try("g1")
	score("g1", 5*qt-1000, 5*qt+1000)

	// Popped by a Redisson client while alive: back in the queue at once,
	// with a short sleep rather than the holder's 30s.
	rdb.LRem(ctx, fairQueue, 0, "g2")
	rdb.ZRem(ctx, fairTimeouts, "g2")
	if got := try("g2"); got <= 0 || got > 100 {
		t.Fatalf("popped waiter's reply = %d, want a sleep of at most 100 ms", got)
	}
	if q := rdb.LRange(ctx, fairQueue, 0, -1).Val(); len(q) != 4 || q[3] != "g2" {
		t.Fatalf("queue %v, want g2 back at the tail", q)
	}
	score("g2", 2*qt-1000, 2*qt+1000) // behind the Redisson waiter now
	if got := try("g2"); got < 29000 {
		t.Fatalf("queued waiter's reply = %d, want the holder's lease", got)
	}

	// The Redisson waiter gives up (or takes the lock): Redisson lowers
	// every score behind it by its wait timeout. A refresh then finds the
	// waiters behind at their own deadlines, no foreign waiter ahead any
	// more, without counting the queue again.
	rdb.LRem(ctx, fairQueue, 0, "java")
	rdb.ZRem(ctx, fairTimeouts, "java")
	for _, w := range []string{"g3", "g2"} {
		rdb.ZIncrBy(ctx, fairTimeouts, -qt, w)
	}
	time.Sleep(20 * time.Millisecond)
	try("g3")
	try("g2")
	score("g3", qt-1000, qt+1000)
	score("g2", qt-1000, qt+1000)
}

// A fair lock's queue has no TTL: allkeys-lru may evict it while its
// waiters' scores stay. Each waiter's next try puts it back in line, at
// the tail, once; the lock free, the first to try takes it.
func TestFairAcquireRejoinsAnEvictedQueue(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	ctx := context.Background()
	try := func(owner string) int64 {
		t.Helper()
		keys := []string{lock, fairQueue, fairTimeouts, latch(owner), fairWaiters, fairGrants}
		got, err := run(t, rdb, lua.FairAcquire, keys, 30000, owner, 300000, 0, 10000, "1", channel, "publish", "0")
		if err != nil {
			t.Fatal(err)
		}
		return got.(int64)
	}
	rdb.HSet(ctx, lock, "holder", 1)
	rdb.PExpire(ctx, lock, 30*time.Second)
	for _, w := range []string{"g1", "g2", "g3"} {
		try(w)
	}
	rdb.Del(ctx, fairQueue) // evicted
	for _, w := range []string{"g3", "g1", "g3"} {
		if got := try(w); got < 29000 {
			t.Fatalf("%s's try = %d, want the holder's lease", w, got)
		}
	}
	if q := rdb.LRange(ctx, fairQueue, 0, -1).Val(); len(q) != 2 || q[0] != "g3" || q[1] != "g1" {
		t.Fatalf("queue %v, want [g3 g1]: each back once, in the order of their tries", q)
	}
	rdb.Del(ctx, lock)
	if got := try("g2"); got <= 0 {
		t.Fatalf("g2's try = %d, want it back in line behind g3 and g1, not the lock", got)
	}
	if got := try("g3"); got != 0 {
		t.Fatalf("g3's try = %d, want the free lock (head of the fairQueue)", got)
	}
	if q := rdb.LRange(ctx, fairQueue, 0, -1).Val(); len(q) != 2 || q[0] != "g1" || q[1] != "g2" {
		t.Fatalf("queue %v, want [g1 g2]", q)
	}
}

// A writer that records itself as waiting (writers first) and then dies
// leaves nothing behind: the set of waiting writers expires with its
// newest record (the robustness suite's hygiene check found the set left
// without a TTL after a waiting writer's process was killed).
func TestWaitingWritersExpireWithTheirLastRecord(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	ctx := context.Background()
	const writers = "lockgen_rwlock_writers:{doc}"
	write := func(owner, req string, life int) int64 {
		keys := []string{lock, latch(req), writers}
		return int64Reply(t)(run(t, rdb, lua.WriteAcquire, keys, 30000, owner+":write", owner, 0, 10000, "1", life))
	}
	if got := write(ownerA, "r1", 3000); got != 0 {
		t.Fatalf("first writer: %d, want 0", got)
	}
	if got := write(ownerB, "r2", 3000); got <= 0 {
		t.Fatalf("second writer: %d, want the holder's TTL", got)
	}
	ttl, err := rdb.PTTL(ctx, writers).Result()
	if err != nil || ttl <= 0 || ttl > 3000*time.Millisecond {
		t.Fatalf("the waiting writers' set has TTL %v (%v), want (0, 3s]", ttl, err)
	}
	// A longer-lived record extends the set; a shorter one never shortens it.
	write("c", "r3", 8000)
	write("d", "r4", 1000)
	if ttl, _ := rdb.PTTL(ctx, writers).Result(); ttl <= 3000*time.Millisecond {
		t.Fatalf("after a record living 8s the set's TTL is %v", ttl)
	}
}
