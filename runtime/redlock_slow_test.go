package runtime_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/faultproxy"
	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/runtime"
)

// One node of three is a round trip slower than the fixed lease (1.1 s
// each way, a 2 s lease): the other two are a quorum, and the lock is had
// from them. A round used to wait for every node's reply, by when the
// validity was spent: the round was thrown away, every time, and a
// Forever wait never got the lock (it ended with its ctx, after 4 s).
// Now the round stops waiting for the slow node once half the validity is
// spent.
func TestARedLockIsHadWhileOneNodeIsSlowerThanItsLease(t *testing.T) {
	servers := redistest.StartN(t, 3)
	px := faultproxy.Start(t, servers[2].Addr())
	nodes := redNodeClients(t, servers[0].Addr(), servers[1].Addr(), px.Addr())
	c := newClient(t, nodes[0], &runtime.Options{RedLockNodes: nodes})
	ctx := ctxT(t)
	const key, lease = "red-slow", 2 * time.Second
	l := c.RedLock(key, runtime.LockOptions{})
	warmRedLock(t, ctx, l)
	px.Latency(faultproxy.Both, 1100*time.Millisecond)

	wctx, cancel := context.WithTimeout(ctx, 4*time.Second)
	defer cancel()
	start := time.Now()
	h, err := l.TryLock(wctx, runtime.Forever, lease)
	if err != nil {
		t.Fatalf("two fast nodes of three, a 2 s lease, one node 2.2 s away: %v after %v", err, time.Since(start))
	}
	// The deadline invariant: the hold's ctx ends before the lease could
	// have run out on the nodes that granted it.
	if dl, ok := h.Deadline(); !ok || !dl.Before(start.Add(lease)) {
		t.Fatalf("hold's deadline %v (set: %v), want one within the lease after the call", dl.Sub(start), ok)
	}
	for i, s := range servers[:2] {
		if s.Client(t).Exists(ctx, key).Val() != 1 {
			t.Fatalf("node %d, one of the quorum, does not hold it", i)
		}
	}
	if err := l.Unlock(h); err != nil {
		t.Fatal(err)
	}
}

// A node whose grant comes after its round was decided: the round did not
// wait for it, and the grant is given back when it comes. With a watchdog
// lease, a part kept would be renewed for ever; one forgotten would expire
// (expired_keys counts it): neither may happen.
func TestARedLockGivesBackAGrantThatCameAfterItsRound(t *testing.T) {
	const key = "red-late"
	l, direct, gate := gatedRedLock(t, key)
	ctx := ctxT(t)
	expired := expiredKeys(t, direct[2])

	gate.arm()
	h, err := gate.await(t, func() (context.Context, error) { return l.TryLock(ctx, 0, runtime.Watchdog) })
	if err != nil {
		t.Fatalf("two of three nodes granted it at once: %v", err)
	}
	for i, rdb := range direct {
		// The third node granted it too: only its reply is held back.
		if rdb.Exists(ctx, key).Val() != 1 {
			t.Fatalf("node %d does not hold it", i)
		}
	}
	if err := l.Unlock(h); err != nil {
		t.Fatal(err)
	}
	gate.open()
	eventually(t, 3*time.Second, "the late grant given back", func() bool { return direct[2].Exists(ctx, key).Val() == 0 })
	if n := expiredKeys(t, direct[2]); n != expired {
		t.Fatalf("the late grant expired (expired_keys %d, was %d): it was not given back", n, expired)
	}
}

// A round that can no longer win (two of three nodes answered that the
// lock is held) does not wait for the third node's reply either, and the
// third's grant, which comes later, is given back.
func TestARedLockRoundThatCannotWinDoesNotWaitForASlowNode(t *testing.T) {
	const key = "red-lost"
	l, direct, gate := gatedRedLock(t, key)
	ctx := ctxT(t)
	for _, rdb := range direct[:2] {
		if _, err := newClient(t, rdb, nil).Mutex(key, runtime.LockOptions{}).TryLock(ctx, 0, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	expired := expiredKeys(t, direct[2])

	gate.arm()
	_, err := gate.await(t, func() (context.Context, error) { return l.TryLock(ctx, 0, 5*time.Second) })
	if !errors.Is(err, runtime.ErrNotAcquired) || errors.Is(err, runtime.ErrQuorum) {
		t.Fatalf("TryLock with the lock held on two of three nodes: %v, want ErrNotAcquired", err)
	}
	gate.open()
	eventually(t, 3*time.Second, "the late grant given back", func() bool { return direct[2].Exists(ctx, key).Val() == 0 })
	if n := expiredKeys(t, direct[2]); n != expired {
		t.Fatalf("the late grant expired (expired_keys %d, was %d): it was not given back", n, expired)
	}
}

// redNodeClients are go-redis clients of RedLock nodes at addrs.
func redNodeClients(t *testing.T, addrs ...string) []redis.UniversalClient {
	var nodes []redis.UniversalClient
	for _, a := range addrs {
		rdb := redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
		t.Cleanup(func() { _ = rdb.Close() })
		nodes = append(nodes, rdb)
	}
	return nodes
}

// warmRedLock takes and releases l once, so that its scripts are loaded
// on every node and a try is one round trip.
func warmRedLock(t *testing.T, ctx context.Context, l *runtime.RedLock) {
	t.Helper()
	h, err := l.TryLock(ctx, 0, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(h); err != nil {
		t.Fatal(err)
	}
}

// gatedRedLock is a RedLock at key over three servers, the third's
// client behind a replyGate, with a watchdog lease of 3 s; and a direct
// client of each server.
func gatedRedLock(t *testing.T, key string) (*runtime.RedLock, []*redis.Client, *replyGate) {
	servers := redistest.StartN(t, 3)
	nodes := redNodeClients(t, servers[0].Addr(), servers[1].Addr(), servers[2].Addr())
	gate := &replyGate{key: key, opened: make(chan struct{})}
	nodes[2].(*redis.Client).AddHook(gate)
	c := newClient(t, nodes[0], &runtime.Options{RedLockNodes: nodes, WatchdogTimeout: 3 * time.Second})
	t.Cleanup(gate.open) // before the Client closes (cleanups run last first)
	l := c.RedLock(key, runtime.LockOptions{})
	warmRedLock(t, ctxT(t), l)
	var direct []*redis.Client
	for _, s := range servers {
		direct = append(direct, s.Client(t))
	}
	return l, direct, gate
}

// A replyGate holds back, once armed, the reply of the next script call on
// its key until it is opened: the node has done the call, its client
// hears of it late.
type replyGate struct {
	key    string
	armed  atomic.Bool
	once   sync.Once
	opened chan struct{}
}

func (g *replyGate) arm()  { g.armed.Store(true) }
func (g *replyGate) open() { g.once.Do(func() { close(g.opened) }) }

// await runs call, which must return while the gate holds a reply back:
// within 3 s, where a round stops waiting for the other nodes once half
// its validity (about 3 s here) is spent, and at once when the round
// cannot win.
func (g *replyGate) await(t *testing.T, call func() (context.Context, error)) (context.Context, error) {
	t.Helper()
	type result struct {
		h   context.Context
		err error
	}
	got := make(chan result, 1)
	go func() {
		h, err := call()
		got <- result{h, err}
	}()
	select {
	case r := <-got:
		return r.h, r.err
	case <-time.After(3 * time.Second):
		g.open()
		r := <-got
		t.Fatalf("the round waited for the held-back reply of one node of three (then: %v)", r.err)
		return nil, nil
	}
}

func (g *replyGate) DialHook(next redis.DialHook) redis.DialHook { return next }
func (g *replyGate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (g *replyGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		a := cmd.Args()
		if len(a) > 3 && a[0] == "evalsha" && a[3] == g.key && g.armed.CompareAndSwap(true, false) {
			select {
			case <-g.opened:
			case <-ctx.Done():
			}
		}
		return err
	}
}

// expiredKeys is the server's count of keys removed by their expiry.
func expiredKeys(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "stats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "expired_keys:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no expired_keys in INFO stats")
	return 0
}

// A RedLock hold whose keys are gone on a quorum of nodes (deleted, or
// lost in a restart without persistence; a fixed lease checks nothing
// until its end) was not held when it was released: Unlock says
// ErrLockLost, as a Mutex's does. It returned nil, counting only the parts
// already known lost.
func TestARedLockUnlockOfAHoldGoneOnAQuorumIsLockLost(t *testing.T) {
	var nodes []redis.UniversalClient
	for range 3 {
		nodes = append(nodes, redistest.Start(t).Client(t))
	}
	c := newClient(t, nodes[0], &runtime.Options{RedLockNodes: nodes})
	ctx := ctxT(t)
	l := c.RedLock("gone", runtime.LockOptions{})
	h, err := l.TryLock(ctx, 0, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes[:2] {
		n.Del(ctx, "gone")
	}
	if err := l.Unlock(h); !errors.Is(err, runtime.ErrLockLost) {
		t.Fatalf("Unlock of a hold gone on 2 of 3 nodes: %v, want ErrLockLost", err)
	}
	h, err = l.TryLock(ctx, 0, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	nodes[0].Del(ctx, "gone") // one part gone: the quorum still held it
	if err := l.Unlock(h); err != nil {
		t.Fatalf("Unlock of a hold gone on 1 of 3 nodes: %v, want nil", err)
	}
}

// A RedLock's grant that comes after its round was decided is given back
// when it comes; a Shutdown that starts before then waits for it, as for
// the other give-backs it waits for. It returned at once, Close then
// refused the give-back, and the late part stayed on its node until its
// lease ran out.
func TestShutdownWaitsForARedLocksLateGrant(t *testing.T) {
	const key = "red-late-shutdown"
	servers := redistest.StartN(t, 3)
	nodes := redNodeClients(t, servers[0].Addr(), servers[1].Addr(), servers[2].Addr())
	gate := &replyGate{key: key, opened: make(chan struct{})}
	nodes[2].(*redis.Client).AddHook(gate)
	c := newClient(t, nodes[0], &runtime.Options{RedLockNodes: nodes, WatchdogTimeout: 3 * time.Second, ReleaseTimeout: 5 * time.Second})
	t.Cleanup(gate.open)
	ctx := ctxT(t)
	l := c.RedLock(key, runtime.LockOptions{})
	warmRedLock(t, ctx, l)
	late := servers[2].Client(t)

	gate.arm()
	h, err := gate.await(t, func() (context.Context, error) { return l.TryLock(ctx, 0, runtime.Watchdog) })
	if err != nil {
		t.Fatalf("two of three nodes granted it at once: %v", err)
	}
	if err := l.Unlock(h); err != nil {
		t.Fatal(err)
	}
	if late.Exists(ctx, key).Val() != 1 {
		t.Fatal("the third node does not hold it: the test reproduces nothing")
	}
	done := make(chan error, 1)
	go func() { done <- c.Shutdown(ctx) }()
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned (%v) before the late grant's reply came", err)
	case <-time.After(300 * time.Millisecond):
	}
	gate.open()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if late.Exists(ctx, key).Val() != 0 {
		t.Fatal("Shutdown returned with the late grant still held on its node: its give-back was dropped")
	}
}
