package hub

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/runtime/internal/calls"
	"github.com/lockgen/lockgen/runtime/internal/scripts"
)

// The hub's connections on a real cluster. The rest of this package's
// tests need no Redis; these start a local cluster (a few seconds).

// A channel subscribed through a slot map that does not know its slot
// moved gets MOVED from the old master: the hub follows it to the new
// one, and a message published there reaches the waiter.
func TestShardedSubscriptionFollowsMovedReply(t *testing.T) {
	cl := redistest.StartCluster(t)
	ctx := context.Background()
	// A map loaded once, never reloaded on its own.
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), ClusterStateReloadInterval: time.Hour})
	t.Cleanup(func() { _ = cc.Close() })
	const channel = "redisson_lock__channel:{moved}"
	if _, err := cc.MasterForKey(ctx, channel); err != nil {
		t.Fatal(err)
	}
	dst := cl.OtherMaster(channel)
	cl.MigrateSlot(t, scripts.KeySlot(channel), dst)

	var log logBuffer
	h := New(Config{Client: cc, Sharded: true, Log: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug})), Slots: calls.NewSlotMaps(nil, cc)})
	t.Cleanup(h.Close)
	w, _ := h.Join(channel, false, Sub{})
	select {
	case <-w.C(): // the confirmation
	case <-time.After(5 * time.Second):
		t.Fatalf("never subscribed; log:\n%s", log.String())
	}
	if !h.Subscribed(channel, false) {
		t.Fatal("woken but not subscribed")
	}
	if !strings.Contains(log.String(), "to="+dst.Addr()) {
		t.Fatalf("no MOVED reply followed to %s; log:\n%s", dst.Addr(), log.String())
	}
	if n := dst.Client(t).PubSubShardNumSub(ctx, channel).Val()[channel]; n != 1 {
		t.Fatalf("%d subscribers on the new master, want 1", n)
	}
	h.Tried(w, false, false)
	if err := dst.Client(t).SPublish(ctx, channel, UnlockMessage).Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.C():
	case <-time.After(5 * time.Second):
		t.Fatal("the unlock message on the new master did not reach the waiter")
	}
	h.Leave(w, true)
}

type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A tracking read of a key whose slot left the master is answered MOVED:
// the reader reports the slot and where it went (its channels are placed
// there, and the key watched there), fails nothing and wakes no one.
func TestTrackingReadOfAMovedKeyReportsItsSlot(t *testing.T) {
	cl := redistest.StartCluster(t)
	ctx := context.Background()
	const key = "tracked:{elsewhere}"
	owner := cl.MasterForKey(key)
	conn := cl.OtherMaster(key).Client(t).Conn()
	t.Cleanup(func() { _ = conn.Close() })
	tr := newTracker()
	e := &entry{name: "redisson_lock__channel:{elsewhere}", key: key, sh: &shard{entries: map[string]*entry{}}}
	e.sh.entries[e.name] = e
	w := &Waiter{c: make(chan struct{}, 1), e: e}
	e.waiters = []*Waiter{w}
	tr.watch(e)
	keys, _ := tr.dueKeys(nil, time.Now().UnixNano())
	moved, err := readKeys(ctx, tr, conn, keys)
	if err != nil || len(keys) != 1 {
		t.Fatalf("read %v, err %v: a MOVED reply is no failure", keys, err)
	}
	if len(moved) != 1 || moved[0].slot != scripts.KeySlot(key) || moved[0].to != owner.Addr() {
		t.Fatalf("moved %+v, want slot %d to %s", moved, scripts.KeySlot(key), owner.Addr())
	}
	if len(w.c) != 0 {
		t.Fatal("a key read on the wrong master woke its waiter")
	}
}
