package runtime_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	goruntime "runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/runtime"
)

// Under the common ACL hardening +@all -@dangerous, INFO is refused but
// PUBSUB SHARDNUMSUB is not. Redisson probes the latter and goes sharded;
// lockgen must choose the same flavour, or neither side's unlock wakes the
// other: here a Redisson-style unlock (DEL, then SPUBLISH "0") must wake a
// lockgen waiter long before the holder's lease ends.
func TestPubSubFlavourIsChosenAsRedissonDoes(t *testing.T) {
	skipShortOutsideCI(t)
	t.Parallel() // servers of its own; it waits out seconds-long timeouts
	cl := redistest.StartCluster(t)
	ctx := ctxT(t)
	for _, node := range cl.Nodes() {
		err := node.Client(t).Do(ctx, "ACL", "SETUSER", "probe", "on", ">pw", "+@all", "-@dangerous", "~*", "&*").Err()
		if err != nil {
			t.Fatal(err)
		}
	}
	rdb := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                      cl.Addrs(),
		Username:                   "probe",
		Password:                   "pw",
		ClusterStateReloadInterval: time.Second,
	})
	t.Cleanup(func() { _ = rdb.Close() })
	if err := rdb.Info(ctx, "server").Err(); err == nil {
		t.Fatal("INFO allowed: the ACL does not reproduce the case")
	}
	logs := &recordingHandler{}
	c := newClient(t, rdb, &runtime.Options{Logger: slog.New(logs)})
	flavour, reason := logs.pubSubChoice()
	t.Logf("pub/sub %s: %s", flavour, reason)
	if flavour != "sharded" {
		t.Errorf("pub/sub flavour %q (%s), want sharded", flavour, reason)
	}

	const key = "acl-lock"
	channel := "redisson_lock__channel:{" + key + "}"
	// A Java holder with a 30 s lease.
	if err := rdb.HSet(ctx, key, "java-uuid:1", 1).Err(); err != nil {
		t.Fatal(err)
	}
	rdb.PExpire(ctx, key, 30*time.Second)
	acquired := make(chan time.Time, 1)
	go func() {
		m := c.Mutex(key, runtime.LockOptions{})
		h, err := m.TryLock(ctx, 20*time.Second, runtime.Watchdog)
		if err != nil {
			t.Error(err)
			return
		}
		acquired <- time.Now()
		_ = m.Unlock(h)
	}()
	master := cl.MasterForKey(channel).Client(t)
	eventually(t, 5*time.Second, "shard subscription on the key's master", func() bool {
		n, _ := master.Do(ctx, "PUBSUB", "SHARDNUMSUB", channel).Slice()
		return len(n) == 2 && n[1] == int64(1)
	})
	time.Sleep(50 * time.Millisecond)
	released := time.Now()
	rdb.Del(ctx, key)
	if err := rdb.SPublish(ctx, channel, "0").Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-acquired:
		t.Logf("woken %v after the SPUBLISH", at.Sub(released))
	case <-time.After(3 * time.Second):
		t.Fatal("waiter not woken by a sharded unlock message")
	}
}

// A Client made as its cluster comes up must not guess the pub/sub
// flavour: a classic guess on a cluster whose other clients use sharded
// pub/sub left its waiters deaf to their unlocks for the Client's life
// (woken 9.8 s after a release, by the end of a 10 s wait; found by a
// review). A cluster that answers within the probe's 10 s gets its
// flavour; one that does not fails NewClient with ErrUnavailable.
func TestAClusterThatComesUpDuringNewClientGetsItsPubSubFlavour(t *testing.T) {
	skipShortOutsideCI(t)
	t.Parallel() // a cluster of its own; it waits out the probe's bound
	cl := redistest.StartCluster(t)
	ctx := ctxT(t)
	// late is a cluster client whose dials are refused until reachable.
	late := func(reachable *atomic.Bool) *redis.ClusterClient {
		rdb := redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: cl.Addrs(),
			Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
				if !reachable.Load() {
					return nil, errors.New("connection refused (the cluster is not up yet)")
				}
				var d net.Dialer
				return d.DialContext(ctx, network, addr)
			},
		})
		t.Cleanup(func() { _ = rdb.Close() })
		return rdb
	}

	t.Run("never answers", func(t *testing.T) {
		// A node that takes connections and never answers: the probes
		// still out when NewClient gives up end with it.
		rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{blackhole(t)}})
		t.Cleanup(func() { _ = rdb.Close() })
		start := time.Now()
		c, err := runtime.NewClient(rdb, nil)
		if err == nil {
			_ = c.Close()
			t.Fatal("NewClient chose a pub/sub flavour for a cluster that never answered")
		}
		if !errors.Is(err, runtime.ErrUnavailable) || !strings.Contains(err.Error(), "Options.PubSub") {
			t.Fatalf("err = %v, want ErrUnavailable naming Options.PubSub", err)
		}
		t.Logf("%v after %v", err, time.Since(start))
		if n := goroutinesIn("hub.probeSharded"); n > 0 {
			t.Fatalf("%d probes still out after NewClient returned", n)
		}
	})

	t.Run("one node paused", func(t *testing.T) {
		// go-redis loads the slots from, and sends each probe to, a
		// node it picks at random, and waits out a paused one for its
		// ReadTimeout (3 s): the other nodes must decide.
		t.Cleanup(cl.Masters()[0].Freeze()) // the node is back for the next subtest
		logs := &recordingHandler{}
		newClient(t, cl.Client(t), &runtime.Options{Logger: slog.New(logs)})
		if flavour, reason := logs.pubSubChoice(); flavour != "sharded" {
			t.Fatalf("pub/sub flavour %q (%s), want sharded", flavour, reason)
		}
	})

	t.Run("loading at first", func(t *testing.T) {
		// A node loading its data set answers LOADING: a passing
		// refusal, not the cluster refusing the probe. (A client that
		// honours ctx deadlines: the probes go through it as it is.)
		rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = rdb.Close() })
		var n atomic.Int32
		rdb.AddHook(replyHook(func(cmd redis.Cmder) error {
			if cmd.Name() == "pubsub" && n.Add(1) <= 3 {
				return replyError("LOADING Redis is loading the dataset in memory")
			}
			return nil
		}))
		logs := &recordingHandler{}
		newClient(t, rdb, &runtime.Options{Logger: slog.New(logs)})
		if flavour, reason := logs.pubSubChoice(); flavour != "sharded" {
			t.Fatalf("pub/sub flavour %q (%s), want sharded", flavour, reason)
		}
	})

	t.Run("loading throughout", func(t *testing.T) {
		// A passing refusal until the bound is no answer either.
		rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = rdb.Close() })
		rdb.AddHook(replyHook(func(cmd redis.Cmder) error {
			if cmd.Name() == "pubsub" {
				return replyError("LOADING Redis is loading the dataset in memory")
			}
			return nil
		}))
		c, err := runtime.NewClient(rdb, nil)
		if err == nil {
			_ = c.Close()
			t.Fatal("NewClient chose a pub/sub flavour for a cluster that answered LOADING throughout")
		}
		if !errors.Is(err, runtime.ErrUnavailable) {
			t.Fatalf("err = %v, want ErrUnavailable", err)
		}
	})

	t.Run("answers after 1.5s", func(t *testing.T) {
		reachable := new(atomic.Bool)
		time.AfterFunc(1500*time.Millisecond, func() { reachable.Store(true) })
		logs := &recordingHandler{}
		early := newClient(t, late(reachable), &runtime.Options{Logger: slog.New(logs)})
		if flavour, reason := logs.pubSubChoice(); flavour != "sharded" {
			t.Fatalf("pub/sub flavour %q (%s), want sharded", flavour, reason)
		}
		// Its waiter wakes at another Client's release.
		holder := newClient(t, cl.Client(t), nil)
		const key = "startup:{a}"
		hm := holder.Mutex(key, runtime.LockOptions{})
		held, err := hm.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		m := early.Mutex(key, runtime.LockOptions{})
		go func() {
			hctx, err := m.TryLock(ctx, 20*time.Second, runtime.Watchdog)
			if err == nil {
				err = m.Unlock(hctx)
			}
			got <- err
		}()
		eventually(t, 10*time.Second, "waiter asleep", func() bool { return runtime.IdleWaiters(m) == 1 })
		if err := hm.Unlock(held); err != nil {
			t.Fatal(err)
		}
		takesTheLock(t, got, 3*time.Second, "the release")
	})
}

// A Sentinel deployment is not a Redis Cluster, whichever go-redis
// client reaches it: a lockgen Client on a FailoverClusterClient (a
// *redis.ClusterClient whose slots come from Sentinel) took sharded
// pub/sub, since Redis 7 accepts the probe outside cluster mode, and
// published its unlocks with SPUBLISH, which Redisson's clients in
// sentinel mode (classic SUBSCRIBE) never got (found by a review).
func TestAFailoverClusterClientUsesClassicPubSub(t *testing.T) {
	skipShortOutsideCI(t)
	st := redistest.StartSentinel(t)
	for _, cluster := range []bool{false, true} {
		t.Run(map[bool]string{false: "FailoverClient", true: "FailoverClusterClient"}[cluster], func(t *testing.T) {
			ctx := ctxT(t)
			var rdb redis.UniversalClient = st.Client(t)
			if cluster {
				fcc := redis.NewFailoverClusterClient(&redis.FailoverOptions{
					MasterName: st.MasterName(), SentinelAddrs: st.SentinelAddrs(), ContextTimeoutEnabled: true,
				})
				t.Cleanup(func() { _ = fcc.Close() })
				rdb = fcc
			}
			c := newClient(t, rdb, nil)
			// A Redisson client in sentinel mode, waiting on the lock.
			sub := st.Master().Client(t).Subscribe(ctx, "redisson_lock__channel:{fo}")
			defer sub.Close()
			if _, err := sub.Receive(ctx); err != nil {
				t.Fatal(err)
			}
			m := c.Mutex("fo", runtime.LockOptions{})
			held, err := m.Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Unlock(held); err != nil {
				t.Fatal(err)
			}
			if _, err := sub.ReceiveTimeout(ctx, 2*time.Second); err != nil {
				t.Fatalf("a classic subscriber (Redisson in sentinel mode) got no unlock message: %v", err)
			}
		})
	}
}

// blackhole is the address of a listener that takes connections and
// never answers, closed when the test ends.
func blackhole(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}

// goroutinesIn counts the goroutines created by a function whose name
// ends with fn (package.Func).
func goroutinesIn(fn string) int {
	buf := make([]byte, 1<<22)
	n := goruntime.Stack(buf, true)
	return strings.Count(string(buf[:n]), "created by github.com/lockgen/lockgen/runtime/internal/"+fn)
}

// replyError is an error reply of Redis' (it has RedisError, as go-redis'
// replies do).
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

// replyHook answers a command with the error reply f returns for it
// (nil: the command goes to Redis).
type replyHook func(redis.Cmder) error

func (h replyHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h replyHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h replyHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if err := h(cmd); err != nil {
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

// recordingHandler keeps the log records it is given.
type recordingHandler struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r.Clone())
	return nil
}
func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler      { return h }

// pubSubChoice returns the flavour and reason of the Debug record in which
// the client logged its pub/sub choice ("" if it logged none).
func (h *recordingHandler) pubSubChoice() (flavour, reason string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.records {
		if r.Level != slog.LevelDebug {
			continue
		}
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "pubsub":
				flavour = a.Value.String()
			case "reason":
				reason = a.Value.String()
			}
			return true
		})
		if flavour != "" {
			return flavour, reason
		}
	}
	return "", ""
}
