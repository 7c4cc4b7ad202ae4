package robustness

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/runtime"
)

// hygieneLimits: "sem" is a leased semaphore; "plain" and "latch" hold
// counters of the user.
func hygieneLimits() Limits {
	lim := synLimits()
	lim.DataKeys = func(k string) bool { return k == "plain" || k == "latch" }
	return lim
}

// TestCheckHygieneAfterCleanRun uses every kind through the runtime,
// releases everything and closes the Client: what is left is user data
// and bookkeeping that expires on its own.
func TestCheckHygieneAfterCleanRun(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t).Client(t)
	c, err := runtime.NewClient(rdb, &runtime.Options{WatchdogTimeout: 2 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	lockUnlock := func(m *runtime.Mutex) {
		h, err := m.TryLock(ctx, time.Second, runtime.Watchdog)
		must(err)
		must(m.Unlock(h))
	}
	lockUnlock(c.Mutex("re:0", runtime.LockOptions{}))
	lockUnlock(c.FairLock("fair:0", runtime.LockOptions{QueueTimeout: 2 * time.Second}))
	lockUnlock(c.ReadWrite("rw:0", runtime.LockOptions{}).Read())
	lockUnlock(c.ReadWrite("rw:0", runtime.LockOptions{}).Write())
	f := c.FencedLock("fenced:0", runtime.LockOptions{})
	h, _, err := f.TryLockFenced(ctx, time.Second, runtime.Watchdog)
	must(err)
	must(f.Unlock(h))
	sem := c.Semaphore("sem", runtime.SemaphoreOptions{Permits: 2})
	h, err = sem.TryAcquire(ctx, 1, time.Second)
	must(err)
	must(sem.Release(h))
	_, err = c.PlainSemaphore("plain", "plain").TrySetPermits(ctx, 2)
	must(err)
	_, err = c.Latch("latch", runtime.LatchOptions{Count: 2}).TrySetCount(ctx, 2)
	must(err)
	must(c.Close())

	r := CheckHygiene(ctx, rdb, hygieneLimits())
	synPass(t, r)
	synNote(t, r, "keys of user data")
	t.Logf("notes: %q", r.Notes)
}

func TestCheckHygieneLeftovers(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t).Client(t)
	now := time.Now()
	cmds := []error{
		rdb.Set(ctx, "sem", 1, 0).Err(),
		rdb.Set(ctx, "plain", 2, 0).Err(),
		rdb.Set(ctx, "redisson_lock_token:{fenced:0}", 9, 0).Err(),
		rdb.HSet(ctx, "lockgen_owner:abc", "pid", 1).Err(),
		rdb.PExpire(ctx, "lockgen_owner:abc", 2*time.Second).Err(),
		// Left behind:
		rdb.HSet(ctx, "re:0", "abc:1", 1).Err(),                       // a lock hash without a TTL
		rdb.HSet(ctx, "rw:0", "mode", "read", "abc:2", 1).Err(),       // a read-write lock hash, with one
		rdb.PExpire(ctx, "rw:0", time.Second).Err(),                   //
		rdb.RPush(ctx, "redisson_lock_queue:{fair:0}", "abc:3").Err(), // a fair queue without a TTL
		rdb.Set(ctx, "lockgen_latch:{re:0}:req", 1, time.Hour).Err(),  // a TTL too long
		rdb.ZAdd(ctx, "{sem}:timeout", redisZ(now.Add(time.Minute), "held"), redisZ(now.Add(-time.Minute), "expired")).Err(),
		rdb.Set(ctx, "stray", 1, 0).Err(), // not user data
	}
	for _, err := range cmds {
		if err != nil {
			t.Fatal(err)
		}
	}
	r := CheckHygiene(ctx, rdb, hygieneLimits())
	want := []string{
		"lock hash re:0 left behind after the leases ran out (TTL none): abc:1=1",
		"lock hash rw:0 left behind",
		"redisson_lock_queue:{fair:0} (list) has no TTL",
		"lockgen_latch:{re:0}:req (string) has a TTL of",
		"semaphore sem: 1 permits still held in {sem}:timeout",
		"stray (string) has no TTL",
	}
	if len(r.Violations) != len(want) {
		t.Errorf("%d violations, want %d:", len(r.Violations), len(want))
		for _, v := range r.Violations {
			t.Log(v.Msg)
		}
	}
	for _, w := range want {
		found := false
		for _, v := range r.Violations {
			found = found || strings.Contains(v.Msg, w)
		}
		if !found {
			t.Errorf("no violation says %q", w)
		}
	}
	synNote(t, r, "1 expired permits in {sem}:timeout")
	synNote(t, r, "1 lockgen_owner keys left that expire within 15s")
	if r.Checked != 10 {
		t.Errorf("checked %d keys, want 10", r.Checked)
	}
}

func redisZ(at time.Time, member string) redis.Z {
	return redis.Z{Score: float64(at.UnixMilli()), Member: member}
}
