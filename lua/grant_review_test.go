package lua_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/lua"
)

// Review tests of grants across processes (grant_next.lua and the scripts
// it is prefixed to).

// A release that offered its own client's waiter W a local hand-off but
// granted the lock to the longest waiter V of another client (reply 3) is
// resent after V released and granted the lock to W in turn (lease cut to
// W's 2 s record). If the resend answers 2 ("handed on"), the releasing
// client gives W a hold with the hand-off's lease (30 s), counted from the
// first copy's send: the key must then live that long, not expire within
// the 2 s of the grant.
func TestGrantReviewResentHandOffAfterARemoteGrantKeepsItsLease(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	hubSubscribe(t, srv.Client(t), "A")
	hubSubscribe(t, srv.Client(t), "B")

	if n := queuedTry(t, rdb, "A:h", "A", "h1", "30000"); n != 0 {
		t.Fatalf("holder's try = %d, want 0", n)
	}
	queuedTry(t, rdb, "B:v", "B", "v1", "30000")
	time.Sleep(2 * time.Millisecond)
	queuedTry(t, rdb, "A:w", "A", "w1", "30000")

	// A's release offers A:w a hand-off; B:v is longer in line: granted.
	if n, err := release(t, rdb, "A:h", "A:w"); err != nil || n != 3 {
		t.Fatalf("A's release = %v %v, want 3 (granted to B:v)", n, err)
	}
	if n := queuedTry(t, rdb, "B:v", "B", "v2", "30000"); n != 0 {
		t.Fatalf("B:v taking its grant = %d, want 0", n)
	}
	if n, err := release(t, rdb, "B:v", ""); err != nil || n != 3 {
		t.Fatalf("B's release = %v %v, want 3 (granted to A:w)", n, err)
	}
	if ttl := rdb.PTTL(ctx, lock).Val(); ttl > 2*time.Second {
		t.Fatalf("PTTL %v, want the grant cut to the record's 2 s", ttl)
	}
	// The copy of A's release that the network kept back arrives now.
	n, err := release(t, rdb, "A:h", "A:w")
	if ttl := rdb.PTTL(ctx, lock).Val(); err == nil && n == 2 && ttl < 29*time.Second {
		t.Fatalf("resent release = 2 (handed on to A:w with a 30 s lease), but the key expires in %v (B's grant)", ttl)
	}
}

// Counts that are equal only by the sum of several subscriptions: a
// lockgen client subscribed on two connections at once (its old one not
// yet dropped by the server while the new one subscribes) and a foreign
// listener. The release must publish, and grant again once the foreign
// listener is gone.
func TestGrantReviewDoubleSubscribedHubNeverHidesAForeignListener(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	hubSubscribe(t, srv.Client(t), "A")
	hubSubscribe(t, srv.Client(t), "A") // the same client's second connection
	foreign := srv.Client(t).Subscribe(ctx, channel)
	if _, err := foreign.Receive(ctx); err != nil {
		t.Fatal(err)
	}

	queuedTry(t, rdb, "B:h", "B", "h1", "30000")
	queuedTry(t, rdb, "A:w", "A", "w1", "30000")
	if n, err := release(t, rdb, "B:h", ""); err != nil || n != 4 {
		t.Fatalf("release with a foreign listener = %v %v, want 4 (published)", n, err)
	}
	if l := rdb.HLen(ctx, lock).Val(); l != 0 {
		t.Fatalf("lock has %d fields after a publishing release, want none", l)
	}
	if q := rdb.ZRange(ctx, gqueue, 0, -1).Val(); len(q) != 1 || q[0] != "A:w" {
		t.Fatalf("queue %v, want A:w still in line", q)
	}

	if err := foreign.Close(); err != nil {
		t.Fatal(err)
	}
	ch := channel
	deadline := time.Now().Add(2 * time.Second)
	for rdb.PubSubNumSub(ctx, ch).Val()[ch] != 2 {
		if time.Now().After(deadline) {
			t.Fatal("the foreign listener's subscription is not gone")
		}
		time.Sleep(5 * time.Millisecond)
	}
	queuedTry(t, rdb, "B:h2", "B", "h2", "30000")
	queuedTry(t, rdb, "A:w", "A", "w2", "30000")
	if n, err := release(t, rdb, "B:h2", ""); err != nil || n != 3 {
		t.Fatalf("release with lockgen listeners only = %v %v, want 3 (granted)", n, err)
	}
	if got := rdb.HGetAll(ctx, lock).Val(); got["A:w"] != "1" {
		t.Fatalf("lock %v, want A:w granted", got)
	}
}

// Every key a grant leaves behind expires on its own: the queue, the
// records (with a "granted" mark in them) and the hubs set, after a grant
// whose grantee never takes or gives it back (its process died right
// after the grant).
func TestGrantReviewAbandonedGrantLeavesOnlyExpiringKeys(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	hubSubscribe(t, srv.Client(t), "A")
	queuedTry(t, rdb, "B:h", "B", "h1", "30000")
	queuedTry(t, rdb, "A:w", "A", "w1", "30000")
	time.Sleep(2 * time.Millisecond)
	queuedTry(t, rdb, "A:x", "A", "x1", "30000")
	if n, err := release(t, rdb, "B:h", ""); err != nil || n != 3 {
		t.Fatalf("release = %v %v, want 3", n, err)
	}
	for _, k := range []string{lock, gqueue, ggrants, ghubs} {
		if ttl := rdb.PTTL(ctx, k).Val(); ttl <= 0 || ttl > 4*time.Second {
			t.Fatalf("%s PTTL %v, want it to expire within the records' 2 x 2 s", k, ttl)
		}
	}
	if g := rdb.HGet(ctx, ggrants, "A:w").Val(); g != "granted" {
		t.Fatalf("A:w's record %q, want granted", g)
	}
}

// releaseFlags is release with handoff.lua's ARGV[7] (own: the releasing
// client is subscribed itself) and ARGV[8] (records: the releaser or the
// local grantee was queued).
func releaseFlags(t *testing.T, rdb *redis.Client, owner, localGrantee, own, records string) int64 {
	t.Helper()
	keys := []string{lock, channel, latch("local"), gqueue, ggrants, ghubs}
	n, err := run(t, rdb, lua.Handoff, keys, owner, "publish", localGrantee, 30000, gprefix, "1", own, records)
	if err != nil {
		t.Fatal(err)
	}
	return n.(int64)
}

// The flags of 8cee14b and 8e13d2a, in one client (only A listens): a
// release never grants to its own client through Redis; with records "1"
// it clears the releaser's and the local grantee's records and no other;
// once another client listens, the releaser's record goes whatever the
// flag says, and the lock is granted to the other client's waiter.
func TestGrantReviewReleaseFlagsClearTheirOwnRecordsOnly(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	hubSubscribe(t, srv.Client(t), "A")
	if n := queuedTry(t, rdb, "A:h", "A", "h1", "30000"); n != 0 {
		t.Fatalf("holder's try = %d, want 0", n)
	}
	queuedTry(t, rdb, "A:w", "A", "w1", "30000")
	time.Sleep(2 * time.Millisecond)
	queuedTry(t, rdb, "A:x", "A", "x1", "30000")

	// No waiter offered (not parked): published, nothing granted to A.
	if n := releaseFlags(t, rdb, "A:h", "", "1", "0"); n != 1 {
		t.Fatalf("release with no local grantee = %d, want 1 (published)", n)
	}
	if l := rdb.Exists(ctx, lock).Val(); l != 0 {
		t.Fatal("the lock was granted to the releaser's own client through Redis")
	}
	if q := rdb.ZCard(ctx, gqueue).Val(); q != 2 {
		t.Fatalf("queue has %d, want A:w and A:x still in line", q)
	}

	// A:w takes the lock; its release hands it to A:x (records "1": both
	// were queued): their records go, and only theirs.
	if n := queuedTry(t, rdb, "A:w", "A", "w2", "30000"); n != 0 {
		t.Fatalf("A:w's try = %d, want 0", n)
	}
	time.Sleep(2 * time.Millisecond)
	queuedTry(t, rdb, "A:y", "A", "y1", "30000")
	if n := releaseFlags(t, rdb, "A:w", "A:x", "1", "1"); n != 2 {
		t.Fatalf("A:w's release = %d, want 2 (handed on to A:x)", n)
	}
	if q := rdb.ZRange(ctx, gqueue, 0, -1).Val(); len(q) != 1 || q[0] != "A:y" {
		t.Fatalf("queue %v, want only A:y", q)
	}
	if r := rdb.HKeys(ctx, ggrants).Val(); len(r) != 1 || r[0] != "A:y" {
		t.Fatalf("records %v, want only A:y's", r)
	}

	// B's waiter comes, behind A:y. A:x's release (flag "0") still looks
	// at the queue, another client listening: A:y, the head and A's own,
	// is handed the lock, and its record goes.
	hubSubscribe(t, srv.Client(t), "B")
	time.Sleep(2 * time.Millisecond)
	queuedTry(t, rdb, "B:v", "B", "v1", "30000")
	if n := releaseFlags(t, rdb, "A:x", "A:y", "1", "0"); n != 2 {
		t.Fatalf("A:x's release = %d, want 2 (A:y is the head and offered)", n)
	}
	if q := rdb.ZRange(ctx, gqueue, 0, -1).Val(); len(q) != 1 || q[0] != "B:v" {
		t.Fatalf("queue %v, want only B:v", q)
	}
	// A:y's release (its client offers no one): B:v is granted.
	if n := releaseFlags(t, rdb, "A:y", "", "1", "1"); n != 3 {
		t.Fatalf("A:y's release = %d, want 3 (granted to B:v)", n)
	}
	if got := rdb.HGetAll(ctx, lock).Val(); got["B:v"] != "1" || len(got) != 1 {
		t.Fatalf("lock %v, want B:v granted", got)
	}
	if r := rdb.HGetAll(ctx, ggrants).Val(); len(r) != 1 || r["B:v"] != "granted" {
		t.Fatalf("records %v, want only B:v's grant mark", r)
	}
}
