package runtime_test

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/internal/runtimetest"
	"github.com/lockgen/lockgen/runtime"
)

// The helpers shared with the fault tests in runtime/faulttest.
var (
	newClient  = runtimetest.NewClient
	eventually = runtimetest.Eventually
	ctxT       = runtimetest.Ctx
)

// clusters holds the Redis Cluster a test (TestLocksOnCluster,
// TestSynchronizersOnCluster, each kind of
// TestLocksExcludeGoroutinesOnCluster) runs its subtests on, by the
// test's name: setup, under such a test, uses that cluster instead of a
// fresh single server. Keyed by test rather than one variable, so that
// such tests can run in parallel with others; the subtests that share a
// cluster, which setup empties, must not run in parallel.
var clusters sync.Map // top-level test name -> *redistest.Cluster

// runOnCluster makes setup, under t and its subtests, run on cl until t
// ends.
func runOnCluster(t *testing.T, cl *redistest.Cluster) {
	clusters.Store(t.Name(), cl)
	t.Cleanup(func() { clusters.Delete(t.Name()) })
}

// onCluster is the cluster t runs on (that of t or of the nearest test
// above it that has one), or nil.
func onCluster(t testing.TB) *redistest.Cluster {
	for name := t.Name(); ; {
		if cl, ok := clusters.Load(name); ok {
			return cl.(*redistest.Cluster)
		}
		i := strings.LastIndexByte(name, '/')
		if i < 0 {
			return nil
		}
		name = name[:i]
	}
}

// setup starts a redis-server and returns a go-redis client and a lock
// Client on it. Under TestLocksOnCluster it empties the shared cluster and
// returns a cluster client instead (and no server).
func setup(t testing.TB, opts *runtime.Options) (*redistest.Server, redis.UniversalClient, *runtime.Client) {
	t.Helper()
	if cl := onCluster(t); cl != nil {
		rdb := cl.Client(t)
		err := rdb.ForEachMaster(context.Background(), func(ctx context.Context, n *redis.Client) error {
			return n.FlushAll(ctx).Err()
		})
		if err != nil {
			t.Fatal(err)
		}
		return nil, rdb, newClient(t, rdb, opts)
	}
	s := redistest.Start(t)
	rdb := s.Client(t)
	return s, rdb, newClient(t, rdb, opts)
}

// commandCounter is a go-redis hook counting the commands sent while on.
// go-redis hooks cannot be added while a client is in use, so the counter
// is installed at setup (setupCounted) and switched on by the test.
type commandCounter struct {
	on atomic.Bool
	n  atomic.Int64
}

// start resets the count and starts counting.
func (h *commandCounter) start() { h.n.Store(0); h.on.Store(true) }

func (h *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.on.Load() {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (h *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.on.Load() {
			h.n.Add(int64(len(cmds)))
		}
		return next(ctx, cmds)
	}
}

func sortIntervals(iv [][2]int64) {
	slices.SortFunc(iv, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
}

// env is a server, a go-redis client and a lock Client.
type env struct {
	srv *redistest.Server
	rdb redis.UniversalClient
	c   *runtime.Client
}

func newEnv(t testing.TB, opts *runtime.Options) *env {
	s, rdb, c := setup(t, opts)
	return &env{s, rdb, c}
}

// setupCounted is setup with a commandCounter on the go-redis client.
func setupCounted(t testing.TB, opts *runtime.Options) (*env, *commandCounter) {
	t.Helper()
	var s *redistest.Server
	var rdb redis.UniversalClient
	if cl := onCluster(t); cl != nil {
		_, rdb, _ = setup(t, opts) // empties the cluster
		rdb = cl.Client(t)
	} else {
		s = redistest.Start(t)
		rdb = s.Client(t)
	}
	cc := &commandCounter{}
	rdb.AddHook(cc)
	return &env{s, rdb, newClient(t, rdb, opts)}, cc
}

// lockKind makes one kind of exclusive lock handle, so the behaviour every
// kind shares is tested on each.
type lockKind struct {
	name string
	new  func(c *runtime.Client, key string, o runtime.LockOptions) *runtime.Mutex
}

var exclusiveKinds = []lockKind{
	{"reentrant", func(c *runtime.Client, key string, o runtime.LockOptions) *runtime.Mutex { return c.Mutex(key, o) }},
	{"fair", func(c *runtime.Client, key string, o runtime.LockOptions) *runtime.Mutex { return c.FairLock(key, o) }},
	{"write", func(c *runtime.Client, key string, o runtime.LockOptions) *runtime.Mutex {
		return c.ReadWrite(key, o).Write()
	}},
}

// readKind is the read side of a read-write lock: it shares the per-hold
// behaviour (leases, loss, ownership) but not exclusion.
var readKind = lockKind{"read", func(c *runtime.Client, key string, o runtime.LockOptions) *runtime.Mutex {
	return c.ReadWrite(key, o).Read()
}}

func kindByName(name string) lockKind {
	for _, k := range append(exclusiveKinds, readKind) {
		if k.name == name {
			return k
		}
	}
	panic("unknown lock kind " + name)
}

// forEachKind runs f as a subtest per kind.
func forEachKind(t *testing.T, kinds []lockKind, f func(t *testing.T, k lockKind)) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) { f(t, k) })
	}
}

// waitersOn counts the pub/sub channels of key with a subscriber: classic
// channels, or on a cluster the shard channels on every master. A
// client's grant channel, subscribed with the lock's (grant.go), is not
// counted.
func waitersOn(t testing.TB, rdb redis.UniversalClient, key string) int {
	t.Helper()
	ctx := context.Background()
	pattern := "*{" + key + "}*"
	// A grant channel is "<lock channel>:<client id>": one part after the
	// tag, where a fair waiter's has two.
	waited := func(chans []string) (n int) {
		for _, ch := range chans {
			_, tail, _ := strings.Cut(ch, "}")
			if strings.Count(tail, ":") != 1 {
				n++
			}
		}
		return n
	}
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		chans, err := rdb.PubSubChannels(ctx, pattern).Result()
		if err != nil {
			t.Fatal(err)
		}
		return waited(chans)
	}
	var n atomic.Int64
	err := cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		chans, err := node.PubSubShardChannels(ctx, pattern).Result()
		n.Add(int64(waited(chans)))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return int(n.Load())
}

// keysLeft lists the keys left in Redis besides request latches (they
// remember an owner's last request for resends and expire on their own),
// owner labels (label.go: they live as long as their Client) and a
// reentrant lock's set of clients that queued waiters (grant.go: it goes
// a few seconds after the last one): it fails the test if one has no
// expiry.
func keysLeft(t testing.TB, rdb redis.UniversalClient) []string {
	t.Helper()
	ctx := context.Background()
	keys, err := allKeys(ctx, rdb)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, k := range keys {
		if expiresOnItsOwn(k) {
			// -1: no expiry; -2: gone since KEYS listed it (a Client's
			// owner label goes with its Close), which a CI run took for
			// "no expiry".
			if ttl := rdb.PTTL(ctx, k).Val(); ttl == -1 {
				t.Fatalf("%s has no expiry", k)
			}
			continue
		}
		left = append(left, k)
	}
	return left
}

// expiresOnItsOwn reports whether k is one of the keys keysLeft allows.
func expiresOnItsOwn(k string) bool {
	for _, p := range []string{"lockgen_latch:", "lockgen_owner:", "lockgen_lock_hubs:"} {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}

// allKeys lists every key, on every master of a cluster.
func allKeys(ctx context.Context, rdb redis.UniversalClient) ([]string, error) {
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		return rdb.Keys(ctx, "*").Result()
	}
	var mu sync.Mutex
	var keys []string
	err := cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		k, err := node.Keys(ctx, "*").Result()
		mu.Lock()
		keys = append(keys, k...)
		mu.Unlock()
		return err
	})
	return keys, err
}

// verifyNoLeak fails if goroutines started since ignore still run.
//
// go-redis runs goroutines of its own on behalf of other tests' clients
// that may start after ignore was taken, and are not this test's: a
// Sentinel client's master look-up and a pool's queued dial finish on
// their own; and a dial of a Sentinel failover client that was in flight
// when the client was closed looks the master up again after Close, which
// sets up a new sentinel connection that nothing closes: its
// +switch-master listener and the two goroutines of that pub/sub's
// Channel (health check, message loop) live on for the rest of the
// process (reproduced by closing a failover client 300 ms after a command
// that dials a killed master: the listener starts 10 ms after Close).
// The runtime never calls PubSub.Channel (TestRuntimeNeverReadsPubSubThroughChannel),
// so a Channel goroutine is never one of lockgen's.
func verifyNoLeak(t *testing.T, ignore goleak.Option) {
	t.Helper()
	goleak.VerifyNone(t, ignore,
		goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9.(*sentinelFailover).MasterAddr.func1"),
		goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).queuedNewConn.func2"),
		goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9.(*sentinelFailover).listen"),
		goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9.(*channel).initHealthCheck.func1"),
		goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9.(*channel).initMsgChan.func1"),
		// Every go-redis client with maintenance notifications on starts
		// this loop, and a test's cluster client makes node clients after
		// a test's leak check began (seen once in a loaded run of
		// TestLocksOnCluster/cancelled_waiter); it ends when the test's
		// client is closed, in its cleanup. The runtime's own clients
		// turn maintenance notifications off and never start it.
		goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/maintnotifications.(*CircuitBreakerManager).cleanupLoop"))
}

// waitThenUnlock runs try (an acquisition with a wait) in a goroutine
// and, once it holds the lock, releases it with unlock; the first error of
// the two (nil: both went well) arrives on the channel.
func waitThenUnlock(try func() (context.Context, error), unlock func(context.Context) error) chan error {
	got := make(chan error, 1)
	go func() {
		h, err := try()
		if err == nil {
			err = unlock(h)
		}
		got <- err
	}()
	return got
}

// stillWaits fails t if the waiter on got returned within d, while a
// fault it should wait out lasts.
func stillWaits(t *testing.T, got chan error, d time.Duration, while string) {
	t.Helper()
	select {
	case err := <-got:
		t.Fatalf("the waiter returned while %s, its wait not over: %v", while, err)
	case <-time.After(d):
	}
}

// takesTheLock fails t unless the waiter on got took (and released) the
// lock within d, once the fault ended.
func takesTheLock(t *testing.T, got chan error, d time.Duration, once string) {
	t.Helper()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("the waiter, once %s: %v", once, err)
		}
	case <-time.After(d):
		t.Fatalf("the waiter did not get the lock within %v of %s", d, once)
	}
}
