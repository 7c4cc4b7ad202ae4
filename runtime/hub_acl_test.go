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
