package runtime_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/runtime"
)

// Replies by which Redis refuses a command it did not run: an ACL that
// does not allow scripts (NOPERM), a server busy with another program's
// slow script (BUSY), a server out of memory under noeviction (OOM: a
// script is refused at its first write, before it wrote).

// A nested release that Redis refused changed nothing there: the owner
// still has the count the client dropped. The next call of the owner
// re-reads it, so the outer release frees the lock (found by a review: a
// read or write lock's outer release was refused as lost, and the key
// stayed held until its lease ran out, with no watchdog renewing it).
func TestANestedReleaseRefusedByRedisLeavesTheCountsInStep(t *testing.T) {
	t.Parallel() // a server of its own; no time bound
	forEachKind(t, append(exclusiveKinds, readKind), func(t *testing.T, k lockKind) {
		s := redistest.Start(t)
		admin, ctx := s.Client(t), ctxT(t)
		c := newClient(t, s.Client(t), nil)
		m := k.new(c, "nested", runtime.LockOptions{})
		outer, inner := lockTwice(t, ctx, m)
		allowScripts(t, admin, false)
		if err := m.Unlock(inner); err == nil || !strings.Contains(err.Error(), "NOPERM") {
			t.Fatalf("nested release without script rights: %v, want Redis' NOPERM", err)
		}
		allowScripts(t, admin, true)
		if err := m.Unlock(outer); err != nil {
			t.Fatalf("outer release: %v (Redis has %v)", err, admin.HGetAll(ctx, "nested").Val())
		}
		if n := admin.Exists(ctx, "nested").Val(); n != 0 {
			t.Fatalf("the lock is still held after the owner's last release: %v, PTTL %v", admin.HGetAll(ctx, "nested").Val(), admin.PTTL(ctx, "nested").Val())
		}
	})
}

// lockTwice takes m, and again under that hold.
func lockTwice(t *testing.T, ctx context.Context, m *runtime.Mutex) (outer, inner context.Context) {
	t.Helper()
	outer, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if inner, err = m.Lock(outer); err != nil {
		t.Fatal(err)
	}
	return outer, inner
}

// allowScripts grants or revokes the default user's right to run scripts.
func allowScripts(t *testing.T, admin *redis.Client, allow bool) {
	t.Helper()
	rule := "-@scripting"
	if allow {
		rule = "+@all"
	}
	if err := admin.Do(context.Background(), "acl", "setuser", "default", rule).Err(); err != nil {
		t.Fatal(err)
	}
}

// A wait is not ended by Redis being busy with another program's script
// or out of memory for a while: the try is sent again, as after a
// failover, and takes the lock once Redis runs it; a release is sent again
// within its ReleaseTimeout. A call that runs out of time first is
// ErrUnavailable.
func TestABusyOrFullRedisIsWaitedOut(t *testing.T) {
	skipShortOutsideCI(t)
	t.Parallel() // servers of their own; bounds of seconds
	faults := []struct {
		name  string
		args  []redistest.Option
		start func(t *testing.T, s *redistest.Server) (healed func()) // the fault heals by itself after about a second
	}{
		{"busy", []redistest.Option{redistest.Arg("--busy-reply-threshold", "50")}, func(t *testing.T, s *redistest.Server) func() {
			done := make(chan struct{})
			rdb := s.Client(t)
			go func() {
				defer close(done)
				_ = rdb.Eval(context.Background(), busyFor1s, nil).Err()
			}()
			eventually(t, 5*time.Second, "Redis busy", func() bool {
				return redis.HasErrorPrefix(s.Client(t).Ping(context.Background()).Err(), "BUSY")
			})
			return func() { <-done }
		}},
		{"out of memory", []redistest.Option{redistest.Arg("--maxmemory-policy", "noeviction")}, func(t *testing.T, s *redistest.Server) func() {
			admin := s.Client(t)
			if err := admin.ConfigSet(context.Background(), "maxmemory", "1").Err(); err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				time.Sleep(time.Second)
				if err := admin.ConfigSet(context.Background(), "maxmemory", "0").Err(); err != nil {
					t.Error(err)
				}
			}()
			return func() { <-done }
		}},
	}
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			forEachKind(t, append(exclusiveKinds, readKind), func(t *testing.T, k lockKind) {
				s := redistest.Start(t, f.args...)
				admin, ctx := s.Client(t), ctxT(t)
				c := newClient(t, s.Client(t), &runtime.Options{ReleaseTimeout: 5 * time.Second})
				m := k.new(c, "refused", runtime.LockOptions{})
				outer, inner := lockTwice(t, ctx, m)
				healed := f.start(t, s)
				// A script that wrote before its first command that may grow
				// memory runs whole under OOM (a fair acquire's queue upkeep).
				single, err := k.new(c, "other", runtime.LockOptions{}).TryLock(ctx, 0, runtime.Watchdog)
				switch {
				case err == nil:
					healed()
					if err := k.new(c, "other", runtime.LockOptions{}).Unlock(single); err != nil {
						t.Fatal(err)
					}
					healed = f.start(t, s)
				case !errors.Is(err, runtime.ErrUnavailable):
					t.Errorf("a single try while Redis refuses: %v, want ErrUnavailable", err)
				}
				released := make(chan error, 1)
				go func() { released <- m.Unlock(inner) }()
				got, err := k.new(c, "other", runtime.LockOptions{}).TryLock(ctx, 10*time.Second, runtime.Watchdog)
				if err != nil {
					t.Fatalf("a 10 s wait beside a refusal of about a second: %v", err)
				}
				healed()
				if err := <-released; err != nil {
					t.Fatalf("nested release sent while Redis refused: %v", err)
				}
				if err := m.Unlock(outer); err != nil {
					t.Fatalf("outer release: %v", err)
				}
				if err := k.new(c, "other", runtime.LockOptions{}).Unlock(got); err != nil {
					t.Fatal(err)
				}
				if n := admin.Exists(ctx, "refused", "other").Val(); n != 0 {
					t.Fatalf("%d locks still held after every release", n)
				}
			})
		})
	}
}

// busyFor1s keeps Redis busy for a second.
const busyFor1s = `local t = redis.call('time') local until_ = tonumber(t[1]) * 1000000 + tonumber(t[2]) + 1000000
while true do local n = redis.call('time') if tonumber(n[1]) * 1000000 + tonumber(n[2]) >= until_ then return 1 end end`
