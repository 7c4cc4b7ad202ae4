package runtime_test

import (
	"bufio"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/lua"
	"github.com/lockgen/lockgen/runtime"
)

// TestHandoffsAndGrantsOnCluster: on Redis Cluster with sharded pub/sub a
// lock's channel is a shard channel on its slot's master, where PUBSUB
// SHARDNUMSUB counts every subscriber, so releases hand the lock over
// within a Client and grant it across Clients as on one server (issue #25
// item 3); a subscriber that is not such a Client (a Redisson waiter)
// makes them publish, and classic pub/sub on a cluster, whose NUMSUB
// counts one node only, keeps them off.
func TestHandoffsAndGrantsOnCluster(t *testing.T) {
	skipShortOutsideCI(t)
	// A cluster of its own; it counts messages and grants, not time.
	t.Parallel()
	cl := redistest.StartCluster(t)
	t.Run("hand-off within a Client", func(t *testing.T) {
		const key = "cl-handoff"
		testHandoffOn(t, cl.Client(t), cl.MasterForKey(key).Client(t), "spublish", key)
	})
	t.Run("hand-off within a Client on one server, to compare", func(t *testing.T) {
		s := redistest.Start(t)
		testHandoffOn(t, s.Client(t), s.Client(t), "publish", "cl-handoff")
	})
	t.Run("grants across Clients in FIFO order", func(t *testing.T) { testGrantsOnCluster(t, cl) })
	t.Run("a foreign subscriber makes releases publish", func(t *testing.T) { testForeignSubscriberOnCluster(t, cl) })
	t.Run("classic pub/sub publishes every release", func(t *testing.T) { testClassicOnClusterPublishes(t, cl) })
}

// shardPublishes counts what scripts SPUBLISH on one master's channels of
// a lock, through MONITOR (a subscription would count as a listener and
// change every release's choice): grants ("2:...") and unlock messages.
type shardPublishes struct {
	grants, unlocks atomic.Int64
	mu              sync.Mutex
	last            string // the last grant's payload
}

func watchShardPublishes(t *testing.T, addr, key string) *shardPublishes {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "+OK") {
		t.Fatalf("MONITOR: %q, %v", line, err)
	}
	sp := &shardPublishes{}
	done := make(chan struct{})
	channel := `"spublish" "redisson_lock__channel:{` + key + `}`
	go func() {
		defer close(done)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<16), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			i := strings.Index(line, channel)
			if i < 0 {
				continue
			}
			switch rest := line[i+len(channel):]; {
			case strings.HasPrefix(rest, `" "0"`):
				sp.unlocks.Add(1)
			case strings.Contains(rest, `" "2:`):
				sp.mu.Lock()
				sp.last = rest[strings.Index(rest, `"2:`)+1:]
				sp.mu.Unlock()
				sp.grants.Add(1)
			}
		}
	}()
	t.Cleanup(func() { _ = conn.Close(); <-done })
	return sp
}

func (sp *shardPublishes) lastGrant() string {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.last
}

// A release with only waiters of its own Client hands the lock to the
// longest waiter in the release's own call: one script call per hold, no
// acquire of the waiters' own, one unlock message (the last release).
// master is the server of key's slot, publish the command the scripts
// publish with.
func testHandoffOn(t *testing.T, rdb redis.UniversalClient, master *redis.Client, publish, key string) {
	ctx := ctxT(t)
	for _, sc := range []*redis.Script{lua.Handoff, lua.Release} {
		sc.Load(ctx, master) // so that no NOSCRIPT round is counted
	}
	c := newClient(t, rdb, nil)
	m := c.Mutex(key, runtime.LockOptions{})
	held, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const n = 6
	order, done := queueWaiters(t, m, n)
	publishes, evals := commandCalls(t, master, publish), commandCalls(t, master, "evalsha")
	start := time.Now()
	if err := m.Unlock(held); err != nil {
		t.Fatal(err)
	}
	done.Wait()
	took := time.Since(start)
	close(order)
	inOrder(t, order, 0)
	if got := commandCalls(t, master, publish) - publishes; got != 1 {
		t.Errorf("%d unlock messages for %d releases, want 1 (the last: nobody left to hand it to)", got, n+1)
	}
	if got := commandCalls(t, master, "evalsha") - evals; got != n+1 {
		t.Errorf("%d script calls for %d hand-offs, want %d (one per release)", got, n+1, n+1)
	}
	t.Logf("%d hand-offs and a release in %v: %d script calls", n, took.Round(time.Microsecond), n+1)
	if keys := keysLeft(t, rdb); len(keys) != 0 {
		t.Fatalf("keys left: %v", keys)
	}
}

// A release by a Client whose hold came through the queue grants the lock
// to the longest waiting lockgen waiter of any Client, and only its Client
// hears of it (on its grant channel, a shard channel in the lock's slot).
func testGrantsOnCluster(t *testing.T, cl *redistest.Cluster) {
	ctx := ctxT(t)
	const key = "cl-grant"
	srv := cl.MasterForKey(key)
	master := srv.Client(t)
	sp := watchShardPublishes(t, srv.Addr(), key)
	a, b, c := newClient(t, cl.Client(t), nil), newClient(t, cl.Client(t), nil), newClient(t, cl.Client(t), nil)
	ma, mb, mc := a.Mutex(key, runtime.LockOptions{}), b.Mutex(key, runtime.LockOptions{}), c.Mutex(key, runtime.LockOptions{})

	held, err := ma.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	gotB := lockAsync(ctx, mb)
	eventually(t, 5*time.Second, "B queued", func() bool { return queued(t, master, key) == 1 })
	if err := ma.Unlock(held); err != nil { // A never waited: it publishes
		t.Fatal(err)
	}
	hb := wantLock(t, gotB, 5*time.Second, "B")

	gotC := lockAsync(ctx, mc)
	eventually(t, 5*time.Second, "C queued", func() bool { return queued(t, master, key) == 1 })
	time.Sleep(5 * time.Millisecond) // places are by the millisecond
	gotA := lockAsync(ctx, ma)
	eventually(t, 5*time.Second, "A queued", func() bool { return queued(t, master, key) == 2 })
	time.Sleep(20 * time.Millisecond)
	unlocks := sp.unlocks.Load()
	if err := mb.Unlock(hb); err != nil {
		t.Fatal(err)
	}
	hc := wantLock(t, gotC, 5*time.Second, "C, the longest waiter")
	eventually(t, 2*time.Second, "the grant seen", func() bool { return sp.grants.Load() >= 1 })
	if p := sp.lastGrant(); !strings.HasPrefix(p, "2:"+c.ID()+":") {
		t.Fatalf("grant %q, want one to C's waiter", p)
	}
	time.Sleep(50 * time.Millisecond)
	select {
	case r := <-gotA:
		t.Fatalf("A got the lock while C holds it: %v", r.err)
	default:
	}
	if err := mc.Unlock(hc); err != nil {
		t.Fatal(err)
	}
	ha := wantLock(t, gotA, 5*time.Second, "A")
	eventually(t, 2*time.Second, "the second grant seen", func() bool { return sp.grants.Load() >= 2 })
	if p := sp.lastGrant(); !strings.HasPrefix(p, "2:"+a.ID()+":") {
		t.Fatalf("grant %q, want one to A's waiter", p)
	}
	if n := sp.grants.Load(); n != 2 {
		t.Fatalf("%d grants, want 2", n)
	}
	if n := sp.unlocks.Load() - unlocks; n != 0 {
		t.Fatalf("%d unlock messages while granting: a grant wakes no one else", n)
	}
	if err := ma.Unlock(ha); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "no keys left", func() bool { return len(keysLeft(t, cl.Client(t))) == 0 })
}

// A plain SSUBSCRIBE on the lock's channel (what a Redisson waiter on a
// cluster sends) is a listener the scripts cannot tell from a lockgen
// Client's: no release hands the lock over or grants it past it, each
// publishes Redisson's unlock message, which it receives.
func testForeignSubscriberOnCluster(t *testing.T, cl *redistest.Cluster) {
	ctx := ctxT(t)
	const key = "cl-foreign"
	master := cl.MasterForKey(key).Client(t)
	foreign := cl.Client(t).SSubscribe(ctx, "redisson_lock__channel:{"+key+"}")
	t.Cleanup(func() { _ = foreign.Close() })
	if _, err := foreign.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	var heard atomic.Int64
	go func() {
		for msg := range foreign.Channel() {
			if msg.Payload == "0" {
				heard.Add(1)
			}
		}
	}()
	a, b := newClient(t, cl.Client(t), nil), newClient(t, cl.Client(t), nil)
	m := a.Mutex(key, runtime.LockOptions{})
	held, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const n = 4
	order, done := queueWaiters(t, m, n)
	// And a waiter of another Client, queued for grants.
	gotB := make(chan error, 1)
	go func() {
		mb := b.Mutex(key, runtime.LockOptions{})
		h, err := mb.Lock(ctx)
		if err == nil {
			err = mb.Unlock(h)
		}
		gotB <- err
	}()
	eventually(t, 5*time.Second, "B queued", func() bool { return queued(t, master, key) == n+1 })
	publishes := commandCalls(t, master, "spublish")
	if err := m.Unlock(held); err != nil {
		t.Fatal(err)
	}
	done.Wait()
	close(order)
	if err := <-gotB; err != nil {
		t.Fatal(err)
	}
	const releases = n + 2
	if got := commandCalls(t, master, "spublish") - publishes; got != releases {
		t.Errorf("%d messages for %d releases, want one each (no hand-off, no grant)", got, releases)
	}
	eventually(t, 2*time.Second, "every unlock message heard by the foreign subscriber", func() bool { return heard.Load() == releases })
}

// Classic pub/sub on a cluster: PUBSUB NUMSUB counts the subscribers of
// one node only, so releases never hand over or grant; each publishes.
func testClassicOnClusterPublishes(t *testing.T, cl *redistest.Cluster) {
	ctx := ctxT(t)
	const key = "cl-classic"
	master := cl.MasterForKey(key).Client(t)
	c := newClient(t, cl.Client(t), &runtime.Options{PubSub: runtime.PubSubClassic})
	m := c.Mutex(key, runtime.LockOptions{})
	held, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const n = 3
	got := make(chan error, n)
	for i := range n {
		go func() {
			h, err := m.Lock(ctx)
			if err == nil {
				err = m.Unlock(h)
			}
			got <- err
		}()
		eventually(t, 5*time.Second, "waiter asleep", func() bool { return runtime.IdleWaiters(m) == i+1 })
	}
	if runtime.ParkedWaiters(m) != 0 {
		t.Fatal("a waiter parked for hand-offs with classic pub/sub on a cluster")
	}
	publishes := commandCalls(t, master, "publish")
	if err := m.Unlock(held); err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := <-got; err != nil {
			t.Fatal(err)
		}
	}
	if got := commandCalls(t, master, "publish") - publishes; got != n+1 {
		t.Errorf("%d unlock messages for %d releases, want one each", got, n+1)
	}
}
