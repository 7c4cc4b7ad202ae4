package runtime_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/runtime"
)

// Review findings on calls abandoned at their deadline (go-redis clients
// with default options), not fixed: each test reproduces one, and runs
// only with LOCKGEN_REVIEW=1 set (go test -race -count=1 -run TestReview
// ./runtime/).

// reviewing reports whether the review's findings run (LOCKGEN_REVIEW=1).
func reviewing() bool { return os.Getenv("LOCKGEN_REVIEW") == "1" }

// reviewEnv is a server, its admin client, and a Client on a go-redis
// client with default options (ContextTimeoutEnabled off).
func reviewEnv(t *testing.T, opts *runtime.Options) (context.Context, *redis.Client, *runtime.Client) {
	s := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	return ctxT(t), s.Client(t), newClient(t, rdb, opts)
}

// A re-entry abandoned on a paused server (its copy still queued there)
// is taken for settled by the outer hold's Unlock: reconcile re-reads the
// owner's count while the server is paused (HGET is a read: it has the
// client's count), drops the unknown mark, and sends the last release
// with the expected count 1. When the server resumes, the re-entry's copy
// runs first (count 2), and the release finds 2, not 1, and does nothing:
// the lock stays held, renewed by no one, until its lease (30 s) runs
// out. With the default ReleaseTimeout the Unlock even has the refusal,
// and reports the lock lost. The reentrant kinds only escape it because
// release.lua deletes the owner's field whatever its count when it
// expects 1; write_release.lua and multi_release.lua check the count.
// Every script is cached first (see
// TestReviewAbandonedReleaseLateNoscriptIsNeverResent).
func TestReviewAbandonedReentryCopyOutlivesTheUnlock(t *testing.T) {
	if !reviewing() {
		return
	}
	kinds := map[string]func(c *runtime.Client) locker{
		"write": func(c *runtime.Client) locker { return c.ReadWrite("rv:rw", runtime.LockOptions{}).Write() },
		"multi-atomic": func(c *runtime.Client) locker {
			return c.MultiLock(runtime.LockOptions{}, c.Mutex("rv:ma", runtime.LockOptions{}), c.Mutex("rv:mb", runtime.LockOptions{}))
		},
	}
	for name, mk := range kinds {
		// ReleaseTimeout 0: the default 5 s, longer than the pause: the
		// Unlock has its reply. 300 ms: it is abandoned.
		for _, release := range []time.Duration{0, 300 * time.Millisecond} {
			t.Run(name+"-release-"+release.String(), func(t *testing.T) {
				ctx, admin, c := reviewEnv(t, &runtime.Options{ReleaseTimeout: release})
				l := mk(c)
				outer, err := l.TryLock(ctx, 0, runtime.Watchdog)
				if err != nil {
					t.Fatal(err)
				}
				inner, err := l.TryLock(outer, 0, runtime.Watchdog) // every script cached
				if err != nil {
					t.Fatal(err)
				}
				if err := l.Unlock(inner); err != nil {
					t.Fatal(err)
				}
				if err := admin.Do(ctx, "client", "pause", 1000, "write").Err(); err != nil {
					t.Fatal(err)
				}
				if _, err := l.TryLock(outer, 100*time.Millisecond, runtime.Watchdog); err == nil {
					t.Fatal("re-entered on a paused server")
				}
				t.Logf("unlock: %v", l.Unlock(outer))
				eventually(t, 3*time.Second, "the lock free after the pause", func() bool { return len(keysLeft(t, admin)) == 0 })
			})
		}
	}
}

// The same with a reentrant lock held twice (the second hold is the one
// released): the partial release expects 2 and finds the copy's 3, so
// the Unlock of a hold the owner has is reported lost (ErrLockLost), and
// Redis counts one hold more than the client from then on (the outer
// Unlock's release, expecting 1, deletes the field all the same).
func TestReviewAbandonedReentryCopyFailsAPartialUnlock(t *testing.T) {
	if !reviewing() {
		return
	}
	ctx, admin, c := reviewEnv(t, nil)
	m := c.Mutex("rv:re", runtime.LockOptions{})
	outer, err := m.TryLock(ctx, 0, runtime.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	mid, err := m.TryLock(outer, 0, runtime.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.Do(ctx, "client", "pause", 1000, "write").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := m.TryLock(mid, 100*time.Millisecond, runtime.Watchdog); err == nil {
		t.Fatal("re-entered on a paused server")
	}
	if err := m.Unlock(mid); err != nil {
		t.Errorf("unlock of the second hold: %v", err)
	}
	if n := admin.HGetAll(ctx, "rv:re").Val(); len(n) != 1 {
		t.Errorf("the lock's hash: %v", n)
	}
	for _, v := range admin.HGetAll(ctx, "rv:re").Val() {
		if v != "1" {
			t.Errorf("Redis counts %s holds of the owner, the client 1", v)
		}
	}
	if err := m.Unlock(outer); err != nil {
		t.Errorf("unlock of the first hold: %v", err)
	}
}

// An Unlock abandoned at its ReleaseTimeout on a paused server whose
// script cache has no release script yet (the Client's first release on
// it, or the first after a restart, a failover or SCRIPT FLUSH): the late
// EVALSHA is answered NOSCRIPT when the server resumes, and Script.run's
// load and resend fail at once, their ctx done (the pool's wait returns
// ctx.Err()). Nothing looks at the late outcome of an abandoned release
// (calls.retry: "an attempt abandoned at the limit is the last"), so the
// lock stays held, renewed by no one, until its lease runs out, where a
// release whose script was cached frees it as the server resumes.
func TestReviewAbandonedReleaseLateNoscriptIsNeverResent(t *testing.T) {
	if !reviewing() {
		return
	}
	ctx, admin, c := reviewEnv(t, &runtime.Options{ReleaseTimeout: 300 * time.Millisecond})
	m := c.Mutex("rv:re", runtime.LockOptions{})
	h, err := m.TryLock(ctx, 0, runtime.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.Do(ctx, "client", "pause", 1000, "write").Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("unlock: %v", m.Unlock(h))
	eventually(t, 3*time.Second, "the lock free after the pause", func() bool { return len(keysLeft(t, admin)) == 0 })
}
