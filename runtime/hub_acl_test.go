package runtime_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/runtime"
)

// connectionsReceived is the server's total_connections_received.
func connectionsReceived(t *testing.T, admin *redis.Client) int {
	t.Helper()
	info, err := admin.Info(context.Background(), "stats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "total_connections_received:"); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	t.Fatal("no total_connections_received in INFO stats")
	return 0
}

// An ACL user allowed the lock channels only (Redis 7 users start with no
// channel at all, so an operator grants exactly what the locks publish
// on) can use CLIENT ID and CLIENT TRACKING but not SUBSCRIBE
// __redis__:invalidate. The hub must not turn that refusal into a
// reconnect loop: one pub/sub connection serves a waiter for as long as
// it waits.
func TestChannelRestrictedACLUserKeepsOnePubSubConnection(t *testing.T) {
	skipShortOutsideCI(t)
	t.Parallel() // servers of its own; it checks counts and order, not times
	s := redistest.Start(t)
	ctx := ctxT(t)
	admin := s.Client(t)
	if err := admin.Do(ctx, "ACL", "SETUSER", "app", "on", ">pw", "~*", "+@all", "resetchannels", "&redisson_*").Err(); err != nil {
		t.Fatal(err)
	}
	user := func() *redis.Client {
		rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), Username: "app", Password: "pw"})
		t.Cleanup(func() { _ = rdb.Close() })
		return rdb
	}
	holder := newClient(t, user(), nil)
	waiter := newClient(t, user(), nil)
	const key = "review:acl"
	hm := holder.Mutex(key, runtime.LockOptions{})
	h, err := hm.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := waitInBackground(ctx, waiter, key)
	channel := "redisson_lock__channel:{" + key + "}"
	eventually(t, 5*time.Second, "waiter subscribed", func() bool {
		return admin.PubSubNumSub(ctx, channel).Val()[channel] == 1
	})
	before := connectionsReceived(t, admin)
	time.Sleep(2 * time.Second)
	dials := connectionsReceived(t, admin) - before
	denied, _ := admin.Do(ctx, "ACL", "LOG").Slice()
	if err := hm.Unlock(h); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if dials > 2 {
		t.Fatalf("%d connections dialled in 2 s while one waiter waited (ACL LOG: %d denials, latest %v): the hub reconnects in a loop", dials, len(denied), denied[:min(1, len(denied))])
	}
}

// An ACL that refuses PUBLISH (here to every user, as an operator's
// mistake or a narrowed role would) takes the wake-up from a release in
// Redis that grants the lock to a waiter of another Client: a fair lock's
// release to the head of its queue, a reentrant lock's to the longest
// lockgen waiter. The release still succeeds (the grant is written), and
// the grantee, its message lost, must still take the lock within a few
// seconds, not sleep through its wait (20 s) while it holds the grant.
func TestAGrantWhoseWakeUpAnACLRefusedIsTakenByItsWaiter(t *testing.T) {
	for _, kind := range []string{"fair", "reentrant"} {
		t.Run(kind, func(t *testing.T) {
			s := redistest.Start(t)
			admin := s.Client(t)
			ctx := ctxT(t)
			c1 := newClient(t, s.Client(t), nil)
			c2 := newClient(t, s.Client(t), nil)
			key := "acl:grant:" + kind
			lock := func(c *runtime.Client) *runtime.Mutex {
				if kind == "fair" {
					return c.FairLock(key, runtime.LockOptions{})
				}
				return c.Mutex(key, runtime.LockOptions{})
			}
			h, err := lock(c1).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan error, 1)
			go func() {
				m := lock(c2)
				w, err := m.TryLock(ctx, 20*time.Second, runtime.Watchdog)
				if err == nil {
					err = m.Unlock(w)
				}
				got <- err
			}()
			eventually(t, 5*time.Second, "the waiter queued", func() bool {
				return admin.Exists(ctx, "redisson_lock_queue:{"+key+"}", "lockgen_lock_queue:{"+key+"}").Val() > 0
			})
			time.Sleep(300 * time.Millisecond) // asleep, its key watched
			if err := admin.Do(ctx, "ACL", "SETUSER", "default", "-publish", "-spublish").Err(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { admin.Do(context.Background(), "ACL", "SETUSER", "default", "+@all") })
			if err := lock(c1).Unlock(h); err != nil {
				t.Fatalf("release whose wake-up was refused: %v", err)
			}
			select {
			case err := <-got:
				if err != nil {
					t.Fatalf("waiter: %v", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("the waiter is asleep 5 s after the release; lock %v", admin.HGetAll(ctx, key).Val())
			}
			eventually(t, 5*time.Second, "nothing locked", func() bool { return admin.Exists(ctx, key).Val() == 0 })
		})
	}
}
