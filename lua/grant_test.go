package lua_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/lua"
)

// The reentrant lock's queue of lockgen waiters (grant_next.lua).
const (
	gqueue  = "lockgen_lock_queue:{doc}"
	ggrants = "lockgen_lock_grants:{doc}"
	ghubs   = "lockgen_lock_hubs:{doc}"
	gprefix = channel // a client's grant channel is channel:<id>
)

// hubSubscribe subscribes, as a lockgen client with id does, to the lock's
// channel and its own grant channel in one SUBSCRIBE.
func hubSubscribe(t *testing.T, rdb *redis.Client, id string) *redis.PubSub {
	t.Helper()
	ctx := context.Background()
	ps := rdb.Subscribe(ctx, channel, gprefix+":"+id)
	t.Cleanup(func() { ps.Close() })
	for range 2 {
		if _, err := ps.Receive(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return ps
}

// queuedTry is a waiting lockgen try of owner (client id hub) with grant
// lease px ("0": none), nonce latch(req).
func queuedTry(t *testing.T, rdb *redis.Client, owner, hub, req, px string) int64 {
	t.Helper()
	keys := []string{lock, latch(req), gqueue, ggrants, ghubs}
	n, err := run(t, rdb, lua.Acquire, keys, 30000, owner, 0, 10000, px, 2000, hub)
	if err != nil {
		t.Fatal(err)
	}
	return n.(int64)
}

func release(t *testing.T, rdb *redis.Client, owner, localGrantee string) (int64, error) {
	t.Helper()
	keys := []string{lock, channel, latch("local"), gqueue, ggrants, ghubs}
	n, err := run(t, rdb, lua.Handoff, keys, owner, "publish", localGrantee, 30000, gprefix, "1")
	if err != nil {
		return 0, err
	}
	return n.(int64), nil
}

// A last release grants the lock to the longest queued waiter of another
// client, tells only that client, on its own channel, and cuts the lease
// to the waiter's record; the grantee's try takes the grant as its own.
func TestReleaseGrantsTheLongestQueuedWaiterOfAnotherClient(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	subX := hubSubscribe(t, srv.Client(t), "X")
	subY := hubSubscribe(t, srv.Client(t), "Y")

	if n := queuedTry(t, rdb, "H:1", "H", "h1", "30000"); n != 0 {
		t.Fatalf("first try = %d, want 0 (free)", n)
	}
	if n := queuedTry(t, rdb, "X:1", "X", "x1", "30000"); n <= 0 {
		t.Fatalf("X's try = %d, want the holder's TTL", n)
	}
	time.Sleep(2 * time.Millisecond)
	if n := queuedTry(t, rdb, "Y:1", "Y", "y1", "30000"); n <= 0 {
		t.Fatalf("Y's try = %d", n)
	}
	// X tries again: it keeps its place, with its new nonce.
	queuedTry(t, rdb, "X:1", "X", "x2", "30000")
	if q := rdb.ZRange(ctx, gqueue, 0, -1).Val(); len(q) != 2 || q[0] != "X:1" {
		t.Fatalf("queue %v, want X:1 first", q)
	}

	if n, err := release(t, rdb, "H:1", ""); err != nil || n != 3 {
		t.Fatalf("release = %v %v, want 3 (granted)", n, err)
	}
	if got := rdb.HGetAll(ctx, lock).Val(); len(got) != 1 || got["X:1"] != "1" {
		t.Fatalf("lock %v, want {X:1: 1}", got)
	}
	if ttl := rdb.PTTL(ctx, lock).Val(); ttl > 2*time.Second || ttl < time.Second {
		t.Fatalf("PTTL %v, want the grant cut to the record's 2s", ttl)
	}
	msg, err := subX.ReceiveTimeout(ctx, time.Second)
	if m, ok := msg.(*redis.Message); err != nil || !ok || m.Payload != "2:X:1 "+latch("x2") {
		t.Fatalf("X got %v %v, want the grant with its latest nonce", msg, err)
	}
	if msg, err := subY.ReceiveTimeout(ctx, 50*time.Millisecond); err == nil {
		t.Fatalf("Y got %v: only the grantee's client is told", msg)
	}
	// X's try, sent before it heard of the grant, takes it as its own.
	if n := queuedTry(t, rdb, "X:1", "X", "x3", "30000"); n != 0 {
		t.Fatalf("grantee's try = %d, want 0", n)
	}
	if ttl := rdb.PTTL(ctx, lock).Val(); ttl < 29*time.Second {
		t.Fatalf("PTTL %v after the grantee's try, want its own lease", ttl)
	}
	if g := rdb.HGet(ctx, ggrants, "X:1").Val(); g != "" {
		t.Fatalf("grant record of X after its try = %q, want none", g)
	}
	if n := rdb.Exists(ctx, latch("x3")).Val(); n != 0 {
		t.Fatal("taking a grant wrote a resend's marker")
	}

	// A foreign listener (Redisson) on the lock's channel: no grant, "0".
	foreign := srv.Client(t).Subscribe(ctx, channel)
	defer foreign.Close()
	if _, err := foreign.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := release(t, rdb, "X:1", ""); err != nil || n != 4 {
		t.Fatalf("release with a foreign listener = %v %v, want 4 (published)", n, err)
	}
	if m, err := foreign.ReceiveMessage(ctx); err != nil || m.Payload != "0" {
		t.Fatalf("foreign listener got %v %v, want 0", m, err)
	}
	if rdb.Exists(ctx, lock).Val() != 0 {
		t.Fatal("lock left after a published release")
	}
}

// A client whose grant channel has no subscriber any more (its process
// died) is skipped, and so is a waiter whose record ran out; a head that
// takes no grants makes the release publish.
func TestGrantSkipsGoneClientsAndStaleRecords(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	subY := hubSubscribe(t, srv.Client(t), "Y")
	dead := hubSubscribe(t, srv.Client(t), "D")

	queuedTry(t, rdb, "H:1", "H", "h1", "30000")
	queuedTry(t, rdb, "D:1", "D", "d1", "30000")
	queuedTry(t, rdb, "Y:1", "Y", "y1", "30000")
	dead.Close()
	time.Sleep(50 * time.Millisecond)

	if n, err := release(t, rdb, "H:1", ""); err != nil || n != 3 {
		t.Fatalf("release = %v %v, want 3", n, err)
	}
	if got := rdb.HGetAll(ctx, lock).Val(); got["Y:1"] != "1" {
		t.Fatalf("lock %v, want Y:1 (D's client is gone)", got)
	}
	if m, err := subY.ReceiveMessage(ctx); err != nil || !strings.HasPrefix(m.Payload, "2:Y:1 ") {
		t.Fatalf("Y got %v %v", m, err)
	}
	if rdb.SIsMember(ctx, ghubs, "D").Val() {
		t.Fatal("a gone client stays in the hubs set")
	}

	// A stale record: Y's waiter Y:2 registered with an alive time already
	// past is skipped; Y:3 takes no grants: "0" is published.
	rdb.ZAdd(ctx, gqueue, redis.Z{Score: 1, Member: "Y:2"})
	rdb.HSet(ctx, ggrants, "Y:2", "30000:1:"+latch("y2"))
	queuedTry(t, rdb, "Y:3", "Y", "y3", "0")
	if n, err := release(t, rdb, "Y:1", ""); err != nil || n != 1 {
		t.Fatalf("release = %v %v, want 1 (published: the head takes no grants)", n, err)
	}
	if m, err := subY.ReceiveMessage(ctx); err != nil || m.Payload != "0" {
		t.Fatalf("Y got %v %v, want 0", m, err)
	}
	if q := rdb.ZRange(ctx, gqueue, 0, -1).Val(); len(q) != 1 || q[0] != "Y:3" {
		t.Fatalf("queue %v, want [Y:3] (the stale record dropped)", q)
	}
}

// A waiter that gives up leaves the queue; one granted the lock that it
// never took releases it on leaving, to the next in line.
func TestMutexLeaveReleasesAnUntakenGrant(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	subX := hubSubscribe(t, srv.Client(t), "X")
	hubSubscribe(t, srv.Client(t), "Y")
	leave := func(owner, untaken string) int64 {
		t.Helper()
		n, err := run(t, rdb, lua.MutexLeave, []string{lock, channel, gqueue, ggrants, ghubs}, owner, "publish", untaken, gprefix)
		if err != nil {
			t.Fatal(err)
		}
		return n.(int64)
	}
	queuedTry(t, rdb, "H:1", "H", "h1", "30000")
	for _, o := range []string{"Y:2", "Y:1", "X:1"} {
		queuedTry(t, rdb, o, o[:1], o, "30000")
		time.Sleep(2 * time.Millisecond) // places are by the millisecond
	}
	if n := leave("Y:2", "1"); n != 1 {
		t.Fatalf("leave of a queued waiter = %d, want 1", n)
	}
	if n, err := release(t, rdb, "H:1", ""); err != nil || n != 3 || rdb.HGet(ctx, lock, "Y:1").Val() != "1" {
		t.Fatalf("release = %v %v, want a grant to Y:1 (Y:2 left)", n, err)
	}
	if n := leave("Y:1", "0"); n != 0 || rdb.HGet(ctx, lock, "Y:1").Val() != "1" {
		t.Fatal("a leave told to keep holds released the grant")
	}
	// Grant to Y:1 again, and let it leave with the grant untaken.
	rdb.Del(ctx, lock)
	rdb.HSet(ctx, lock, "H:1", 1)
	queuedTry(t, rdb, "Y:1", "Y", "y3", "30000")
	rdb.ZAdd(ctx, gqueue, redis.Z{Score: 1, Member: "Y:1"}) // first in line
	if n, err := release(t, rdb, "H:1", ""); err != nil || n != 3 || rdb.HGet(ctx, lock, "Y:1").Val() != "1" {
		t.Fatalf("release = %v %v, want a grant to Y:1", n, err)
	}
	if n := leave("Y:1", "1"); n != 2 {
		t.Fatalf("leave with an untaken grant = %d, want 2", n)
	}
	if got := rdb.HGetAll(ctx, lock).Val(); len(got) != 1 || got["X:1"] != "1" {
		t.Fatalf("lock %v, want the grant passed on to X:1", got)
	}
	if m, err := subX.ReceiveMessage(ctx); err != nil || !strings.HasPrefix(m.Payload, "2:X:1 ") {
		t.Fatalf("X got %v %v", m, err)
	}
	if _, err := release(t, rdb, "Y:1", ""); !errors.Is(err, redis.Nil) {
		t.Fatalf("release by the waiter that left: %v, want nil", err)
	}
}
