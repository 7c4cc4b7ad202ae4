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

func TestHandoffGivesTheLockOnOnlyWhenNoOneElseListens(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	marker := latch("grant1")
	keys := []string{lock, channel, marker, gqueue, ggrants, ghubs}

	// Only the releasing client listens (one subscriber): handed on.
	mine := rdb.Subscribe(ctx, channel)
	defer mine.Close()
	if _, err := mine.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	rdb.HSet(ctx, lock, ownerA, 1)
	if _, err := run(t, rdb, lua.Handoff, keys, ownerB, "publish", "c", 30000, gprefix, "1"); !errors.Is(err, redis.Nil) {
		t.Fatalf("non-owner hand-off: %v, want nil", err)
	}
	for i := 0; i < 2; i++ { // the second run is a resend of the first
		if n, err := run(t, rdb, lua.Handoff, keys, ownerA, "publish", ownerB, 30000, gprefix, "1"); err != nil || n.(int64) != 2 {
			t.Fatalf("hand-off (copy %d) = %v, %v; want 2", i+1, n, err)
		}
	}
	if got := rdb.HGetAll(ctx, lock).Val(); len(got) != 1 || got[ownerB] != "1" {
		t.Fatalf("lock after the hand-off = %v, want {%s: 1}", got, ownerB)
	}
	if ttl := rdb.PTTL(ctx, lock).Val(); ttl <= 29*time.Second {
		t.Fatalf("PTTL %v after the hand-off, want the grantee's lease", ttl)
	}
	if n := rdb.Exists(ctx, marker).Val(); n != 0 {
		t.Fatal("a hand-off wrote its marker (only a settlement does)")
	}

	// A settled (aborted) grant is never given, even by a late copy: the
	// lock is released with the unlock message instead.
	rdb.Del(ctx, lock)
	rdb.HSet(ctx, lock, ownerA, 1)
	rdb.Set(ctx, marker, "abort", time.Minute)
	if n, err := run(t, rdb, lua.Handoff, keys, ownerA, "publish", "c", 30000, gprefix, "1"); err != nil || n.(int64) != 1 {
		t.Fatalf("hand-off of an aborted grant = %v, %v; want 1 (released)", n, err)
	}
	if n := rdb.Exists(ctx, lock).Val(); n != 0 {
		t.Fatal("lock left after a release that could not hand on")
	}
	if msg, err := mine.ReceiveMessage(ctx); err != nil || msg.Payload != "0" {
		t.Fatalf("message %v %v, want the unlock message", msg, err)
	}

	// Another process listens too: released and published, never handed.
	other := srv.Client(t).Subscribe(ctx, channel)
	defer other.Close()
	if _, err := other.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	rdb.Del(ctx, marker)
	rdb.HSet(ctx, lock, ownerA, 1)
	if n, err := run(t, rdb, lua.Handoff, keys, ownerA, "publish", ownerB, 30000, gprefix, "1"); err != nil || n.(int64) != 4 {
		t.Fatalf("hand-off with another listener = %v, %v; want 4 (released, others listen)", n, err)
	}
	if n := rdb.Exists(ctx, lock).Val(); n != 0 {
		t.Fatal("the lock went to a local waiter while another process listened")
	}
	if msg, err := other.ReceiveMessage(ctx); err != nil || msg.Payload != "0" {
		t.Fatalf("other listener got %v %v, want the unlock message", msg, err)
	}
	// A resend of that release finds nothing to hand on.
	if _, err := run(t, rdb, lua.Handoff, keys, ownerA, "publish", ownerB, 30000, gprefix, "1"); !errors.Is(err, redis.Nil) {
		t.Fatalf("resent release: %v, want nil", err)
	}
}

// A fair lock's last release gives the lock to the head of the queue when
// the head is a lockgen waiter that takes grants, and tells it with "2:"
// and its latest try's nonce on its own channel; a head that takes none (a Redisson waiter) is woken
// with "0". A waiter that gave up as its grant was on the way releases it
// on leaving, to the next in line.
func TestFairReleaseGrantsTheHeadThatTakesGrants(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	ctx := context.Background()
	join := func(owner, grantPx string) { fairJoin(t, rdb, owner, grantPx) }
	release := func(owner string) int64 {
		t.Helper()
		n, err := run(t, rdb, lua.FairRelease, []string{lock, fairQueue, fairTimeouts, fairWaiters, fairGrants}, 30000, owner, "publish", 1, channel)
		if err != nil {
			t.Fatal(err)
		}
		return n.(int64)
	}
	join(ownerA, "0") // takes the free lock
	join(ownerB, "20000:b1")
	join("java", "0")
	subB := rdb.Subscribe(ctx, channel+":"+ownerB)
	defer subB.Close()
	subJava := rdb.Subscribe(ctx, channel+":java")
	defer subJava.Close()
	for _, s := range []*redis.PubSub{subB, subJava} {
		if _, err := s.Receive(ctx); err != nil {
			t.Fatal(err)
		}
	}

	if n := release(ownerA); n != 2 {
		t.Fatalf("release = %d, want 2 (granted to the head)", n)
	}
	if got := rdb.HGetAll(ctx, lock).Val(); len(got) != 1 || got[ownerB] != "1" {
		t.Fatalf("lock = %v, want {%s: 1}", got, ownerB)
	}
	if ttl := rdb.PTTL(ctx, lock).Val(); ttl <= 19*time.Second || ttl > 20*time.Second {
		t.Fatalf("PTTL %v, want the grantee's 20s lease", ttl)
	}
	if q := rdb.LRange(ctx, fairQueue, 0, -1).Val(); len(q) != 1 || q[0] != "java" {
		t.Fatalf("queue %v, want [java]", q)
	}
	if got := rdb.HGetAll(ctx, fairGrants).Val(); len(got) != 1 || got[ownerB] != "granted" {
		t.Fatalf("grant records %v, want only {%s: granted}", got, ownerB)
	}
	if msg, err := subB.ReceiveMessage(ctx); err != nil || msg.Payload != "2:b1" {
		t.Fatalf("grantee got %v %v, want the grant message with its try's nonce, 2:b1", msg, err)
	}
	// A try of the grantee that comes before it claims the grant takes
	// it: once, and without a resend's marker.
	join(ownerB, "20000:b1b")
	if got := rdb.HGet(ctx, lock, ownerB).Val(); got != "1" {
		t.Fatalf("count %q after the grantee's try, want 1", got)
	}
	if n := rdb.Exists(ctx, latch(ownerB), fairGrants).Val(); n != 0 {
		t.Fatal("the grantee's try left a marker or its granted mark")
	}

	// The Redisson waiter at the head is woken, not granted.
	if n := release(ownerB); n != 1 {
		t.Fatalf("release = %d, want 1 (head woken)", n)
	}
	if n := rdb.Exists(ctx, lock).Val(); n != 0 {
		t.Fatal("a Redisson head was granted the lock")
	}
	if msg, err := subJava.ReceiveMessage(ctx); err != nil || msg.Payload != "0" {
		t.Fatalf("Redisson head got %v %v, want the unlock message 0", msg, err)
	}

	// A grant never taken is released by the grantee's leave, to the next.
	rdb.Del(ctx, fairQueue, fairTimeouts, fairWaiters, fairGrants)
	join(ownerA, "0")
	join(ownerB, "20000:b2")
	join("c", "20000:c1")
	if n := release(ownerA); n != 2 {
		t.Fatalf("release = %d, want 2", n)
	}
	leave := []string{lock, fairQueue, fairTimeouts, fairWaiters, fairGrants}
	if n, err := run(t, rdb, lua.FairLeave, leave, ownerB, channel, "publish", "1"); err != nil || n.(int64) != 2 {
		t.Fatalf("leave = %v %v, want 2 (the untaken grant released)", n, err)
	}
	if got := rdb.HGetAll(ctx, lock).Val(); len(got) != 1 || got["c"] != "1" {
		t.Fatalf("lock = %v after the grantee left, want it granted on to c", got)
	}
	// "0": the client says the owner may hold the lock: left alone.
	if n, err := run(t, rdb, lua.FairLeave, leave, "c", channel, "publish", "0"); err != nil || n.(int64) != 0 {
		t.Fatalf("leave = %v %v, want 0", n, err)
	}
	if got := rdb.HGet(ctx, lock, "c").Val(); got != "1" {
		t.Fatal("a leave told to keep holds released one")
	}
}

// A wake-up's PUBLISH that Redis refuses (an ACL without PUBLISH) does not
// fail the script that wrote before it: a release still frees the lock
// and says so, and a fair lock's release still reports the grant it wrote
// (the grantee's client finds it by key tracking). A wake-up is a hint.
func TestAWakeUpRefusedByAnACLKeepsTheScriptsWritesAndReply(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	ctx := context.Background()
	fair := []string{lock, fairQueue, fairTimeouts, fairWaiters, fairGrants}
	join := func(owner, grantPx string) { fairJoin(t, rdb, owner, grantPx) }
	join(ownerA, "0")
	join(ownerB, "20000:b1")
	if err := rdb.Do(ctx, "acl", "setuser", "default", "-publish", "-spublish").Err(); err != nil {
		t.Fatal(err)
	}
	defer rdb.Do(ctx, "acl", "setuser", "default", "+@all")
	if err := rdb.Publish(ctx, channel, "0").Err(); err == nil {
		t.Fatal("PUBLISH not refused")
	}

	if n, err := run(t, rdb, lua.FairRelease, fair, 30000, ownerA, "publish", 1, channel); err != nil || n.(int64) != 2 {
		t.Fatalf("fair release = %v %v, want 2 (granted to the head)", n, err)
	}
	if got := rdb.HGetAll(ctx, lock).Val(); len(got) != 1 || got[ownerB] != "1" {
		t.Fatalf("lock = %v, want the grant {%s: 1}", got, ownerB)
	}
	rdb.Del(ctx, lock, fairQueue, fairTimeouts, fairWaiters, fairGrants)

	rdb.HSet(ctx, lock, ownerA, 1)
	if n, err := run(t, rdb, lua.Release, []string{lock, channel}, 30000, ownerA, "publish", 1); err != nil || n.(int64) != 1 {
		t.Fatalf("release = %v %v, want 1 (the lock freed)", n, err)
	}
	if rdb.Exists(ctx, lock).Val() != 0 {
		t.Fatal("the lock is left after its last release")
	}
}

// A releasing client that believes it listens but whose subscription is
// gone from the server (its connection died unseen, or its cluster slot
// moved) is not counted among the channel's subscribers when it names its
// grant channel (ARGV[9], subscribed with the lock's channel): the one
// subscriber there is someone else, a Redisson waiter say, and the lock
// is published, not handed on past it. With its grant channel subscribed,
// the same release hands the lock on.
func TestHandoffCountsTheReleaserOnlyWhereItsSubscriptionIs(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	keys := []string{lock, channel, latch("gone"), gqueue, ggrants, ghubs}
	mine := gprefix + ":client-a"
	foreign := srv.Client(t).Subscribe(ctx, channel)
	defer foreign.Close()
	if _, err := foreign.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	rdb.HSet(ctx, lock, ownerA, 1)
	if n, err := run(t, rdb, lua.Handoff, keys, ownerA, "publish", ownerB, 30000, gprefix, "1", "1", "0", mine); err != nil || n.(int64) != 1 {
		t.Fatalf("release with the releaser's subscription gone = %v, %v; want 1 (published)", n, err)
	}
	if msg, err := foreign.ReceiveMessage(ctx); err != nil || msg.Payload != "0" {
		t.Fatalf("the other listener got %v %v, want the unlock message", msg, err)
	}
	if n := rdb.Exists(ctx, lock).Val(); n != 0 {
		t.Fatal("the lock went to the releaser's waiter past the other listener")
	}

	// The foreign subscriber was the releaser's own (lock and grant
	// channel on one connection): handed on.
	if err := foreign.Subscribe(ctx, mine); err != nil {
		t.Fatal(err)
	}
	if _, err := foreign.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	rdb.HSet(ctx, lock, ownerA, 1)
	if n, err := run(t, rdb, lua.Handoff, keys, ownerA, "publish", ownerB, 30000, gprefix, "1", "1", "0", mine); err != nil || n.(int64) != 2 {
		t.Fatalf("release with the releaser subscribed = %v, %v; want 2 (handed on)", n, err)
	}
}

// fairJoin queues owner as a fair waiter of lock (fair_acquire.lua, the
// lock held), with grantPx as the lease it wants granted ("0": none).
func fairJoin(t *testing.T, rdb *redis.Client, owner, grantPx string) {
	t.Helper()
	keys := []string{lock, fairQueue, fairTimeouts, latch(owner), fairWaiters, fairGrants}
	if _, err := run(t, rdb, lua.FairAcquire, keys, 30000, owner, 300000, 0, 10000, "1", channel, "publish", grantPx); err != nil {
		t.Fatal(err)
	}
}
