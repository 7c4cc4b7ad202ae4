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
	keys := []string{lock, channel, marker}

	// Only the releasing client listens (one subscriber): handed on.
	mine := rdb.Subscribe(ctx, channel)
	defer mine.Close()
	if _, err := mine.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	rdb.HSet(ctx, lock, ownerA, 1)
	if _, err := run(t, rdb, lua.Handoff, keys, ownerB, "publish", "c", 30000); !errors.Is(err, redis.Nil) {
		t.Fatalf("non-owner hand-off: %v, want nil", err)
	}
	for i := 0; i < 2; i++ { // the second run is a resend of the first
		if n, err := run(t, rdb, lua.Handoff, keys, ownerA, "publish", ownerB, 30000); err != nil || n.(int64) != 2 {
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
	if n, err := run(t, rdb, lua.Handoff, keys, ownerA, "publish", "c", 30000); err != nil || n.(int64) != 1 {
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
	if n, err := run(t, rdb, lua.Handoff, keys, ownerA, "publish", ownerB, 30000); err != nil || n.(int64) != 1 {
		t.Fatalf("hand-off with another listener = %v, %v; want 1 (released)", n, err)
	}
	if n := rdb.Exists(ctx, lock).Val(); n != 0 {
		t.Fatal("the lock went to a local waiter while another process listened")
	}
	if msg, err := other.ReceiveMessage(ctx); err != nil || msg.Payload != "0" {
		t.Fatalf("other listener got %v %v, want the unlock message", msg, err)
	}
	// A resend of that release finds nothing to hand on.
	if _, err := run(t, rdb, lua.Handoff, keys, ownerA, "publish", ownerB, 30000); !errors.Is(err, redis.Nil) {
		t.Fatalf("resent release: %v, want nil", err)
	}
}
