package runtime_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/runtime"
)

// A wait on a go-redis client with default options (a socket read waits
// out ReadTimeout, 3 s) that ends while its try's reply is still on its
// way from a server that is only slow (CLIENT PAUSE WRITE, longer than
// the wait, shorter than ReadTimeout) returns on time, and its late reply
// is resolved when it comes: a lock it took on a free lock is given back,
// a waiter it queued behind a holder is withdrawn, and no request marker
// is left (nothing was handed to settlement).

// lateKind is one kind under TestAbandonedWaitsGiveBackWhatTheirLateRepliesTook:
// acquire takes it (the release func or an error), clean reports what is
// left in Redis that should not be once nobody holds it ("": nothing).
type lateKind struct {
	name    string
	acquire func(ctx context.Context, c *runtime.Client, wait time.Duration) (func() error, error)
	clean   func(ctx context.Context, rdb *redis.Client) string
}

// leftKeys lists the keys of rdb but those allowed (by prefix), the
// Clients' owner labels, and the plain semaphore every test arms: a lock
// leaves nothing when free, but a fenced lock's token counter.
func leftKeys(allowed ...string) func(ctx context.Context, rdb *redis.Client) string {
	return func(ctx context.Context, rdb *redis.Client) string {
		keys, err := rdb.Keys(ctx, "*").Result()
		if err != nil {
			return err.Error()
		}
		allowed := append(allowed, "lockgen_owner:", "out:plain")
		keys = slices.DeleteFunc(keys, func(k string) bool {
			return slices.ContainsFunc(allowed, func(p string) bool { return strings.HasPrefix(k, p) })
		})
		if len(keys) == 0 {
			return ""
		}
		slices.Sort(keys)
		return fmt.Sprint(keys)
	}
}

// freeCount reports a semaphore whose free count is not n, or that has
// held permits (key timeouts: a permit-expirable semaphore's).
func freeCount(key, timeouts string, n int) func(ctx context.Context, rdb *redis.Client) string {
	return func(ctx context.Context, rdb *redis.Client) string {
		free, err := rdb.Get(ctx, key).Int()
		if err != nil && err != redis.Nil {
			return err.Error()
		}
		held := int64(0)
		if timeouts != "" {
			held = rdb.ZCard(ctx, timeouts).Val()
		}
		if free != n || held != 0 {
			return fmt.Sprintf("free count %d, %d held permits, want %d and none", free, held, n)
		}
		return ""
	}
}

var lateKinds = []lateKind{
	{"reentrant", outageKinds[0].acquire, leftKeys()},
	{"fair", outageKinds[1].acquire, leftKeys()},
	{"read", outageKinds[2].acquire, leftKeys()},
	{"write", outageKinds[3].acquire, leftKeys()},
	{"multi-atomic", outageKinds[4].acquire, leftKeys()},
	{"multi-in-order", outageKinds[5].acquire, leftKeys()},
	{"fenced", outageKinds[7].acquire, leftKeys("redisson_lock_token")},
	{"semaphore", func(ctx context.Context, c *runtime.Client, wait time.Duration) (func() error, error) {
		s := c.Semaphore("out:sem", runtime.SemaphoreOptions{Permits: 1})
		h, err := s.TryAcquire(ctx, 1, wait)
		if err != nil {
			return nil, err
		}
		return func() error { return s.Release(h) }, nil
	}, freeCount("out:sem", "{out:sem}:timeout", 1)},
	{"plain-semaphore", func(ctx context.Context, c *runtime.Client, wait time.Duration) (func() error, error) {
		p := c.PlainSemaphore("out:plain", "plain")
		if err := p.TryAcquire(ctx, 1, wait); err != nil {
			return nil, err
		}
		return func() error { return p.Release(ctx, 1) }, nil
	}, freeCount("out:plain", "", 1)},
}

func TestAbandonedWaitsGiveBackWhatTheirLateRepliesTook(t *testing.T) {
	// Its kinds were parallel already; now beside the other parallel tests.
	t.Parallel()
	for _, k := range lateKinds {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			s := redistest.Start(t)
			admin := s.Client(t)
			ctx := ctxT(t)
			rdb := redis.NewClient(&redis.Options{Addr: s.Addr()}) // default options
			t.Cleanup(func() { _ = rdb.Close() })
			c := newClient(t, rdb, nil)
			// The holder, and the probe that finds the lock free in the
			// end, are another process.
			other := newClient(t, redis.NewClient(&redis.Options{Addr: s.Addr(), ContextTimeoutEnabled: true}), nil)
			if _, err := other.PlainSemaphore("out:plain", "plain").TrySetPermits(ctx, 1); err != nil {
				t.Fatal(err)
			}
			for _, held := range []bool{false, true} {
				release := func() error { return nil }
				if held {
					var err error
					if release, err = k.acquire(ctx, other, 0); err != nil {
						t.Fatal(err)
					}
				}
				if err := admin.Do(ctx, "client", "pause", 500, "write").Err(); err != nil {
					t.Fatal(err)
				}
				rel, err := k.acquire(ctx, c, 100*time.Millisecond)
				if err == nil {
					_ = rel()
					t.Fatalf("held %v: acquired on a paused server", held)
				}
				t.Logf("held %v: %v", held, err)
				if err := release(); err != nil {
					t.Fatalf("held %v: the holder's release: %v", held, err)
				}
				eventually(t, 5*time.Second, fmt.Sprintf("held %v: the lock free again", held), func() bool {
					rel, err := k.acquire(ctx, other, 0)
					return err == nil && rel() == nil
				})
				left := k.clean(ctx, admin)
				for end := time.Now().Add(5 * time.Second); left != "" && time.Now().Before(end); left = k.clean(ctx, admin) {
					time.Sleep(5 * time.Millisecond)
				}
				if left != "" {
					t.Fatalf("held %v: left behind 5 s after: %s", held, left)
				}
			}
		})
	}
}

// A nested lock (another key, the outer hold's owner) whose wait ends on
// a paused server, taken again by the same owner while the server is
// still paused: the leave of the first wait, which goes on in the
// background when it has no reply within leaveWithin, speaks for a nested
// owner, so it leaves the hold the owner took meanwhile alone (it took it
// for an untaken grant, and deleted it while the client held it, when it
// ran after the new acquire: a race, so a few rounds). Once released,
// both locks are free.
func TestAbandonedNestedWaitLeavesTheOwnersNewHoldAlone(t *testing.T) {
	// Parallel, each kind on a server of its own: what it checks is
	// which holds Redis has, not when; it mostly waits out pauses.
	t.Parallel()
	kinds := map[string]func(c *runtime.Client, key string) locker{
		"reentrant": func(c *runtime.Client, key string) locker { return c.Mutex(key, runtime.LockOptions{}) },
		"fair":      func(c *runtime.Client, key string) locker { return c.FairLock(key, runtime.LockOptions{}) },
	}
	for name, mk := range kinds {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, admin, c := lateEnv(t, nil) // a client with default options
			for round := range 4 {
				a, b := c.Mutex("late:a", runtime.LockOptions{}), mk(c, fmt.Sprintf("late:b%d", round))
				outer, err := a.TryLock(ctx, 0, runtime.Watchdog)
				if err != nil {
					t.Fatal(err)
				}
				if err := admin.Do(ctx, "client", "pause", 400, "write").Err(); err != nil {
					t.Fatal(err)
				}
				if _, err := b.TryLock(outer, 100*time.Millisecond, runtime.Watchdog); err == nil {
					t.Fatal("acquired on a paused server")
				}
				inner, err := b.TryLock(outer, 2*time.Second, runtime.Watchdog)
				if err != nil {
					t.Fatalf("round %d: again: %v", round, err)
				}
				time.Sleep(100 * time.Millisecond) // the background leave's time to strike
				if err := b.Unlock(inner); err != nil {
					t.Errorf("round %d: unlock inner: %v", round, err)
				}
				if err := a.Unlock(outer); err != nil {
					t.Errorf("round %d: unlock outer: %v", round, err)
				}
				eventually(t, 3*time.Second, "both locks free", func() bool { return len(keysLeft(t, admin)) == 0 })
			}
		})
	}
}

// lateEnv is a server, its admin client, and a Client on a go-redis
// client with default options (ContextTimeoutEnabled off).
func lateEnv(t *testing.T, opts *runtime.Options) (context.Context, *redis.Client, *runtime.Client) {
	s := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	return ctxT(t), s.Client(t), newClient(t, rdb, opts)
}

// A re-entry abandoned on a paused server (its copy still queued there),
// then the outer hold's Unlock: the Unlock re-reads the owner's count
// only once the re-entry's late reply came (holds.Registry.Abandon), within its
// ReleaseTimeout, and the re-entry's resolution gives back what the copy
// took otherwise. Without that the re-read, a read the paused server
// answers, had the client's count, and the last release, sent with the
// expected count 1, found the copy's 2 when the server resumed and did
// nothing: the lock stayed held until its lease (30 s), and with the
// default ReleaseTimeout the Unlock reported it lost. (release.lua
// deletes the owner's field whatever its count when it expects 1;
// write_release.lua and multi_release.lua check the count.) Every script
// is cached first (see TestReviewAbandonedReleaseLateNoscriptIsNeverResent).
func TestAnUnlockReconcilesOnlyAfterTheLateReplyOfAnAbandonedReentry(t *testing.T) {
	// Parallel, each case on a server of its own: what it checks is
	// which holds Redis has, not when; it mostly waits out a 1 s pause.
	t.Parallel()
	kinds := map[string]func(c *runtime.Client) locker{
		"write": func(c *runtime.Client) locker { return c.ReadWrite("late:rw", runtime.LockOptions{}).Write() },
		"multi-atomic": func(c *runtime.Client) locker {
			return c.MultiLock(runtime.LockOptions{}, c.Mutex("late:ma", runtime.LockOptions{}), c.Mutex("late:mb", runtime.LockOptions{}))
		},
	}
	for name, mk := range kinds {
		// ReleaseTimeout 0: the default 5 s, longer than the pause: the
		// Unlock has its reply. 300 ms: it is abandoned.
		for _, release := range []time.Duration{0, 300 * time.Millisecond} {
			t.Run(name+"-release-"+release.String(), func(t *testing.T) {
				t.Parallel()
				ctx, admin, c := lateEnv(t, &runtime.Options{ReleaseTimeout: release})
				l := mk(c)
				// Warm: a connection dialled, the scripts cached. Cold, the
				// first acquire (a dial, HELLO, NOSCRIPT, SCRIPT LOAD) overran
				// the 300 ms ReleaseTimeout that bounds a single try on a
				// loaded box ("acquire: redis unavailable: outcome unknown").
				// A warm-up that overran goes again once what it left is gone.
				eventually(t, 10*time.Second, "a warm-up round", func() bool {
					h, err := l.TryLock(ctx, 0, runtime.Watchdog)
					return err == nil && l.Unlock(h) == nil
				})
				eventually(t, 10*time.Second, "the warm-up's lock free", func() bool {
					return len(keysLeft(t, admin)) == 0 && runtime.SettlerIdle(c)
				})
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
				if err := l.Unlock(outer); err != nil && release == 0 {
					t.Errorf("unlock with the time to have the late reply: %v", err)
				}
				eventually(t, 3*time.Second, "the lock free after the pause", func() bool { return len(keysLeft(t, admin)) == 0 })
			})
		}
	}
}

// The same with a reentrant lock held twice, the second hold released:
// the partial release expected 2 and found the copy's 3, so the Unlock of
// a hold the owner had was reported lost (ErrLockLost), and Redis counted
// one hold more than the client from then on.
func TestAPartialUnlockReconcilesOnlyAfterTheLateReplyOfAnAbandonedReentry(t *testing.T) {
	// A server of its own; it mostly waits out a 1 s pause.
	t.Parallel()
	ctx, admin, c := lateEnv(t, nil)
	m := c.Mutex("late:re", runtime.LockOptions{})
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
	if n := admin.HGetAll(ctx, "late:re").Val(); len(n) != 1 {
		t.Errorf("the lock's hash: %v", n)
	}
	for _, v := range admin.HGetAll(ctx, "late:re").Val() {
		if v != "1" {
			t.Errorf("Redis counts %s holds of the owner, the client 1", v)
		}
	}
	if err := m.Unlock(outer); err != nil {
		t.Errorf("unlock of the first hold: %v", err)
	}
}
