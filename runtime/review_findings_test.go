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
