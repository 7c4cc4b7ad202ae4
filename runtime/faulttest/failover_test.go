package faulttest_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/internal/runtimetest"
	"github.com/lockgen/lockgen/runtime"
)

// The failover of issue #27: a Redis Cluster of 3 masters with a replica
// each, cluster-node-timeout 1 s, WatchdogTimeout 3 s; the master of the
// locks' slot is killed right after a renewal of the holder's watchdog
// hold, and its replica is promoted 2-3 s later.
const (
	failoverNodeTimeout = time.Second
	failoverWatchdog    = 3 * time.Second
)

// What the targets allow, after the promotion:
//
//   - renewLag: until a watchdog renewal lands on the new master. The
//     Client's cluster clients re-read the slot map at most every 200 ms
//     while calls fail (go-redis' reload cooldown; failover.go); a
//     renewal that failed is sent again WatchdogTimeout/24 (125 ms) later;
//     a renewal sent on the old map gives up after go-redis' 3 retries on
//     the dead master (8, 16 and 32 ms backoffs, with up to as much again
//     of jitter: 112 ms); 63 ms for round trips and a loaded machine.
//   - waiterLag: until a waiter takes a lock the failover freed: the
//     issue's target. Its parts: the slot map re-read (200 ms), the hub's
//     next subscription attempt (hubMaxBackoff, 250 ms) and a try (a round
//     trip, and loading the script on the new master): about 0.5 s.
//   - With go-redis' own dial retries (LOCKGEN_FAILOVER_GOREDIS_DEFAULTS,
//     below), a call or a slot map reload that tries the dead master
//     first dials it 5 times, 100 ms apart, and go-redis sends a command
//     twice to the same node before it re-reads the slot map: a waiter's
//     try started on the old map adds up to 2 × 400 ms.
const (
	renewLag     = 200*time.Millisecond + failoverWatchdog/24 + 112*time.Millisecond + 63*time.Millisecond
	waiterLag    = time.Second
	dialRetryLag = 2 * 400 * time.Millisecond
)

// TestClusterFailover kills the master of a slot under two holds of one
// Client and two waiters of another, per kind, and measures what the
// failover costs them (each time after the kill):
//
//   - the kept hold, whose lock reached the replica (SyncReplicas: 1; the
//     semaphore, which has no SyncReplicas, waits for the replica's
//     offset): the watchdog renews it on the new master before its
//     deadline, and its holder never learns of the failover. It is then
//     released, and its waiter, asleep on the lock's shard channel that
//     its Client moved to the new master, is woken by the release's
//     message.
//   - the freed hold, taken while the replica was cut off from its master:
//     the failover loses it. Its waiter takes it within a second of the
//     promotion; its holder is told by its first renewal on the new master
//     (at the latest at its deadline). That the two may overlap is what
//     asynchronous replication means for a lock: the test reports by how
//     much, and asserts only that the holder's deadline held.
//
// The kinds share one cluster: each kills the master of its own slot, then
// restarts the killed node, which rejoins as a replica.
//
// The Redis clients are go-redis ClusterClients with their defaults but
// DialerRetries: 1, so that what is measured is lockgen's (the watchdog's
// own client dials once in any case). LOCKGEN_FAILOVER_GOREDIS_DEFAULTS=1
// keeps go-redis' 5 dial retries, as docs/scale-out.md measures too.
func TestClusterFailover(t *testing.T) {
	skipShortOutsideCI(t)
	cl := redistest.StartCluster(t, redistest.Arg("--cluster-node-timeout", strconv.FormatInt(failoverNodeTimeout.Milliseconds(), 10)))
	for _, k := range failoverKinds() {
		t.Run(k.name, func(t *testing.T) { testFailover(t, cl, k) })
	}
}

// failoverKind takes a lock of one kind: wait as in TryLock, sync asks for
// SyncReplicas: 1 where the kind has it. It returns the hold's ctx and a
// func that releases it.
type failoverKind struct {
	name string
	take func(ctx context.Context, c *runtime.Client, key string, wait time.Duration, sync bool) (context.Context, func() error, error)
}

func failoverKinds() []failoverKind {
	var kinds []failoverKind
	for _, k := range exclusiveKinds {
		name := k.name
		if name == "write" {
			name = "read-write"
		}
		kinds = append(kinds, failoverKind{name, func(ctx context.Context, c *runtime.Client, key string, wait time.Duration, sync bool) (context.Context, func() error, error) {
			o := runtime.LockOptions{}
			if sync {
				o.SyncReplicas = 1
			}
			m := k.new(c, key, o)
			h, err := m.TryLock(ctx, wait, runtime.Watchdog)
			return h, func() error { return m.Unlock(h) }, err
		}})
	}
	return append(kinds, failoverKind{"semaphore", func(ctx context.Context, c *runtime.Client, key string, wait time.Duration, _ bool) (context.Context, func() error, error) {
		s := c.Semaphore(key, runtime.SemaphoreOptions{Permits: 1})
		h, err := s.TryAcquire(ctx, 1, wait)
		return h, func() error { return s.Release(h) }, err
	}})
}

func testFailover(t *testing.T, cl *redistest.Cluster, k failoverKind) {
	ctx := ctxT(t)
	// Each bound below allows for how late this process ran its timers
	// meanwhile: a loaded box's stall is not the runtime's.
	lag := runtimetest.StartLagMeter(t)
	tag := "{failover-" + k.name + "}"
	keptKey, freedKey := "kept:"+tag, "freed:"+tag
	master := cl.MasterForKey(keptKey)
	replica := replicaOf(t, cl, master)
	masterC, replicaC := master.Client(t), replica.Client(t)

	var renewals renewalLog
	holder := newClient(t, failoverClusterClient(t, cl), &runtime.Options{
		WatchdogTimeout: failoverWatchdog, Observer: runtime.ObserverFunc(renewals.observe)})
	waiter := newClient(t, failoverClusterClient(t, cl), &runtime.Options{WatchdogTimeout: failoverWatchdog})

	kept, releaseKept, err := k.take(ctx, holder, keptKey, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	keptLost := doneAt(kept)
	keptWaiter := startWaiter(ctx, waiter, k, keptKey)
	eventually(t, 10*time.Second, "the kept lock's waiter subscribed on the master", func() bool {
		return shardChannels(t, masterC, keptKey) > 0
	})

	// Right after a renewal of the kept hold has reached the replica, cut
	// the replica off (it fails to authenticate to its master from now on)
	// and take the freed lock, which only the master ever has.
	n := renewals.count()
	eventually(t, 2*failoverWatchdog, "a renewal of the kept hold", func() bool { return renewals.count() > n })
	keptDeadline := holdDeadline(renewals.lastSent())
	waitReplicated(t, masterC, replicaC)
	cutReplication(t, replicaC)
	// A failure before the kill must not leave the replica cut off: the
	// next kind's run needs the cluster whole (a CI run's first kind
	// failed its set-up, and the three after it could not start).
	t.Cleanup(func() { _ = replicaC.ConfigSet(context.Background(), "masterauth", "").Err() })
	freedDeadline := time.Now().Add(failoverWatchdog) // the take is sent after this
	freed, releaseFreed, err := k.take(ctx, holder, freedKey, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	freedLost := doneAt(freed)
	freedWaiter := startWaiter(ctx, waiter, k, freedKey)
	eventually(t, 10*time.Second, "the freed lock's waiter subscribed on the master", func() bool {
		return shardChannels(t, masterC, freedKey) > 0
	})
	// The kill should come before the kept hold's next renewal, which
	// would reach only the master: the replica's copy of the lock would
	// then end before the holder's deadline, and the failover could lose
	// the kept hold as it loses the freed one. On a loaded box the set-up
	// above can take longer than a renewal period (1 s); the run then
	// checks of the kept hold only what holds of any hold the failover
	// may lose (see checkKeptAfterALateRenewal), and all of the freed one.
	lateRenewal := renewals.count() != n+1

	killed := time.Now()
	after := func(at time.Time) time.Duration { return at.Sub(killed).Round(time.Millisecond) }
	var promoted, freedTaken time.Time
	defer func() {
		if t.Failed() {
			t.Logf("after the kill: promotion %v, renewals %v, freed lock taken %v, its holder told %v, kept hold's deadline %v",
				after(promoted), renewals.since(killed), after(freedTaken), after(freedLost()), after(keptDeadline))
		}
	}()
	master.Kill()
	if lateRenewal { // which may have renewed the freed hold too
		freedDeadline = later(freedDeadline, holdDeadline(renewals.lastSentBefore(killed)))
	}
	promoted = waitPromoted(t, replicaC)
	restoreReplication(t, replicaC)
	t.Cleanup(func() {
		master.Restart() // it rejoins as a replica of the promoted node
		cl.WaitForState(t, 30*time.Second)
	})

	// The freed lock: its waiter takes it, its holder is told.
	select {
	case freedTaken = <-freedWaiter.taken:
	case err := <-freedWaiter.failed:
		t.Fatalf("the freed lock's waiter: %v", err)
	case <-ctx.Done():
		t.Fatal("the freed lock's waiter never took it")
	}
	eventually(t, time.Until(freedDeadline)+time.Second, "the freed hold ended", func() bool { return freed.Err() != nil })
	if !errors.Is(context.Cause(freed), runtime.ErrLockLost) {
		t.Fatalf("the freed hold ended with %v, want ErrLockLost", context.Cause(freed))
	}
	_ = releaseFreed()
	limit := waiterLag
	if goRedisDefaults() {
		limit += dialRetryLag
	}
	if d, late := freedTaken.Sub(promoted), lag.Worst(promoted, freedTaken); d > limit+late {
		t.Errorf("the freed lock's waiter took it %v after the promotion, want at most %v (+ %v this process ran timers late)", d.Round(time.Millisecond), limit, late)
	}
	// Its holder's renewal on the new master finds it gone, or its
	// deadline ends it, whichever comes first (+ the clock's wake-up).
	bound := promoted.Add(renewLag)
	if freedDeadline.Before(bound) {
		bound = freedDeadline
	}
	if at := freedLost(); at.After(bound.Add(50*time.Millisecond + lag.Worst(bound, at))) {
		t.Errorf("the freed hold's holder was told %v after the kill, want by %v (+ %v this process ran timers late)", after(at), after(bound), lag.Worst(bound, at))
	}
	freedWaiter.release()

	// The kept hold: renewed on the new master, unless the promotion came
	// too late for that.
	eventually(t, failoverWatchdog, "a renewal of the kept hold after the kill, or its loss", func() bool {
		return !renewals.firstAfter(killed).IsZero() || kept.Err() != nil
	})
	if lateRenewal {
		t.Logf("%s: a renewal of the kept hold came between the one the replica got and the kill (the set-up took over a renewal period)", k.name)
		checkKeptAfterALateRenewal(t, kept, keptLost, renewals.lastSentBefore(killed), lag)
		_ = releaseKept() // ErrLockLost if the failover took it
		select {
		case <-keptWaiter.taken:
		case err := <-keptWaiter.failed:
			t.Fatalf("the kept lock's waiter: %v", err)
		case <-ctx.Done():
			t.Fatal("the kept lock's waiter never took it")
		}
		keptWaiter.release()
		return
	}
	renewed := renewals.firstAfter(killed)
	canKeep := promoted.Add(renewLag + lag.Worst(promoted, keptDeadline)).Before(keptDeadline)
	if kept.Err() != nil {
		if canKeep {
			t.Fatalf("the kept hold was lost %v after the kill, the promotion %v before its deadline: %v",
				after(keptLost()), keptDeadline.Sub(promoted).Round(time.Millisecond), context.Cause(kept))
		}
		// The deadline came first: the lock is free once its lease runs
		// out on the new master, never before the holder was told.
		select {
		case at := <-keptWaiter.taken:
			if at.Before(keptLost()) {
				t.Fatalf("the kept lock's waiter took it %v before its holder was told it lost it", keptLost().Sub(at))
			}
		case err := <-keptWaiter.failed:
			t.Fatalf("the kept lock's waiter: %v", err)
		case <-ctx.Done():
			t.Fatal("the kept lock's waiter never took it")
		}
		t.Logf("%s after the kill: promotion %v, the kept hold's deadline %v: too late to renew it; the freed lock taken by its waiter %v",
			k.name, after(promoted), after(keptDeadline), after(freedTaken))
		keptWaiter.release()
		return
	}

	// Its waiter sleeps on the lock's shard channel, on the new master by
	// now. Its tries before the renewal on the new master saw the lease
	// the last replicated renewal set, which ends just after keptDeadline;
	// later ones saw at least renewed + WatchdogTimeout. Released after
	// the former, well before the latter, the waiter is woken by the
	// release's message or not for seconds.
	eventually(t, 5*time.Second, "the kept lock's waiter subscribed on the new master", func() bool {
		return shardChannels(t, replicaC, keptKey) > 0
	})
	time.Sleep(time.Until(keptDeadline.Add(300 * time.Millisecond)))
	if kept.Err() != nil {
		t.Fatalf("the kept hold was lost %v after the kill: %v", after(keptLost()), context.Cause(kept))
	}
	released := time.Now()
	if err := releaseKept(); err != nil {
		t.Fatal(err)
	}
	var keptTaken time.Time
	select {
	case keptTaken = <-keptWaiter.taken:
	case err := <-keptWaiter.failed:
		t.Fatalf("the kept lock's waiter: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("the kept lock's waiter was not woken within 5s of the release")
	}
	if keptTaken.Before(released) {
		t.Fatalf("the kept lock's waiter took it %v before its holder released it", released.Sub(keptTaken))
	}
	if d, late := keptTaken.Sub(released), lag.Worst(released, keptTaken); d > 500*time.Millisecond+late {
		t.Fatalf("the kept lock's waiter was woken %v after the release, want within 500ms (this process ran timers %v late)", d, late)
	}

	t.Logf("%s after the kill: promotion %v, first renewal %v (deadline %v), freed lock taken by its waiter %v, its holder told %v (overlap %v), kept lock's waiter woken %v after its release",
		k.name, after(promoted), after(renewed), after(keptDeadline), after(freedTaken), after(freedLost()),
		max(freedLost().Sub(freedTaken), 0).Round(time.Millisecond), keptTaken.Sub(released).Round(time.Millisecond))
	if d, late := renewed.Sub(promoted), lag.Worst(promoted, renewed); d > renewLag+late {
		t.Errorf("the kept hold was renewed %v after the promotion, want at most %v (+ %v this process ran timers late)", d.Round(time.Millisecond), renewLag, late)
	}
	keptWaiter.release()
}

// checkKeptAfterALateRenewal checks the kept hold of a run whose last
// renewal before the kill (sent at lastSent) reached only the master: the
// failover may lose it, as it loses the freed one, and what must hold is
// the deadline: its holder is told by the lease from that renewal, less
// the drift margin (+ the clock's wake-up), or its renewal on the new
// master keeps it.
func checkKeptAfterALateRenewal(t *testing.T, kept context.Context, keptLost func() time.Time, lastSent time.Time, lag *runtimetest.LagMeter) {
	t.Helper()
	deadline := holdDeadline(lastSent)
	eventually(t, time.Until(deadline)+time.Second, "the kept hold renewed past its deadline, or ended", func() bool {
		return kept.Err() != nil || time.Now().After(deadline.Add(100*time.Millisecond))
	})
	if kept.Err() == nil {
		return // renewed on the new master
	}
	if !errors.Is(context.Cause(kept), runtime.ErrLockLost) {
		t.Fatalf("the kept hold ended with %v, want ErrLockLost", context.Cause(kept))
	}
	if at := keptLost(); at.After(deadline.Add(50*time.Millisecond + lag.Worst(deadline, at))) {
		t.Errorf("the kept hold's holder was told %v after its deadline (+ %v this process ran timers late)", at.Sub(deadline), lag.Worst(deadline, at))
	}
}

// holdDeadline is the deadline of a watchdog hold whose last renewal (or
// acquisition) was sent at sent: the lease less the drift margin (1% +
// 5 ms). Redis keeps the lock a little longer.
func holdDeadline(sent time.Time) time.Time {
	return sent.Add(failoverWatchdog - failoverWatchdog/100 - 5*time.Millisecond)
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// goRedisDefaults reports whether the test's cluster clients keep go-redis'
// dial retries (LOCKGEN_FAILOVER_GOREDIS_DEFAULTS=1).
func goRedisDefaults() bool { return os.Getenv("LOCKGEN_FAILOVER_GOREDIS_DEFAULTS") == "1" }

// failoverClusterClient is a go-redis cluster client with go-redis'
// defaults, as an application makes one, but for one dial per attempt
// (see TestClusterFailover).
func failoverClusterClient(t *testing.T, cl *redistest.Cluster) *redis.ClusterClient {
	o := &redis.ClusterOptions{Addrs: cl.Addrs()}
	if !goRedisDefaults() {
		o.DialerRetries = 1
	}
	cc := redis.NewClusterClient(o)
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// doneAt returns when ctx ended (the zero time while it has not).
func doneAt(ctx context.Context) func() time.Time {
	var mu sync.Mutex
	var at time.Time
	context.AfterFunc(ctx, func() {
		mu.Lock()
		at = time.Now()
		mu.Unlock()
	})
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return at
	}
}

// renewalLog records a Client's watchdog calls that confirmed a hold.
type renewalLog struct {
	mu    sync.Mutex
	times []time.Time // when each was confirmed
	sent  []time.Time // when each was sent
}

func (r *renewalLog) observe(e runtime.Event) {
	if e.Kind != runtime.EventRenewed || e.Err != nil || e.Renewed == 0 {
		return
	}
	now := time.Now()
	r.mu.Lock()
	r.times = append(r.times, now)
	r.sent = append(r.sent, now.Add(-e.Took))
	r.mu.Unlock()
}

func (r *renewalLog) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.times)
}

func (r *renewalLog) lastSent() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sent[len(r.sent)-1]
}

// lastSentBefore is when the last confirmed renewal sent before t was sent.
func (r *renewalLog) lastSentBefore(t time.Time) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	var at time.Time
	for _, s := range r.sent {
		if s.Before(t) {
			at = s
		}
	}
	return at
}

func (r *renewalLog) firstAfter(t time.Time) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, at := range r.times {
		if at.After(t) {
			return at
		}
	}
	return time.Time{}
}

// since lists the confirmations after t, as durations since t.
func (r *renewalLog) since(t time.Time) []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var d []time.Duration
	for _, at := range r.times {
		if at.After(t) {
			d = append(d, at.Sub(t).Round(time.Millisecond))
		}
	}
	return d
}

// waiterRun is an acquisition waiting in its own goroutine.
type waiterRun struct {
	taken   chan time.Time
	failed  chan error
	release func()
}

func startWaiter(ctx context.Context, c *runtime.Client, k failoverKind, key string) *waiterRun {
	w := &waiterRun{taken: make(chan time.Time, 1), failed: make(chan error, 1)}
	var rel func() error
	done := make(chan struct{})
	w.release = func() {
		<-done
		if rel != nil {
			_ = rel()
		}
	}
	go func() {
		defer close(done)
		_, release, err := k.take(ctx, c, key, runtime.Forever, false)
		if err != nil {
			w.failed <- err
			return
		}
		rel = release
		w.taken <- time.Now()
	}()
	return w
}

// replicaOf is the node that replicates master.
func replicaOf(t *testing.T, cl *redistest.Cluster, master *redistest.Server) *redistest.Server {
	t.Helper()
	info, err := master.Client(t).Info(context.Background(), "replication").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range cl.Nodes() {
		if strings.Contains(info, ",port="+strconv.Itoa(s.Port())+",") {
			return s
		}
	}
	t.Fatalf("no node replicates %s:\n%s", master, info)
	return nil
}

// shardChannels counts the shard channels subscribed on node whose name
// contains key.
func shardChannels(t *testing.T, node *redis.Client, key string) int {
	t.Helper()
	chans, err := node.PubSubShardChannels(context.Background(), "*"+key+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	return len(chans)
}

// replicationOffset reads an offset of INFO replication.
func replicationOffset(t *testing.T, node *redis.Client, field string) int64 {
	t.Helper()
	info, err := node.Info(context.Background(), "replication").Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("INFO %s: %q", field, v)
			}
			return n
		}
	}
	t.Fatalf("INFO replication has no %s:\n%s", field, info)
	return 0
}

// waitReplicated waits until replica has processed everything master has
// written so far.
func waitReplicated(t *testing.T, master, replica *redis.Client) {
	t.Helper()
	want := replicationOffset(t, master, "master_repl_offset")
	eventually(t, 5*time.Second, "the replica caught up", func() bool {
		return replicationOffset(t, replica, "slave_repl_offset") >= want
	})
}

// cutReplication stops replica from receiving its master's writes: its
// link is dropped and it fails to authenticate when it reconnects. Its
// cluster bus is untouched, so it is still promoted when the master fails.
func cutReplication(t *testing.T, replica *redis.Client) {
	t.Helper()
	ctx := context.Background()
	if err := replica.ConfigSet(ctx, "masterauth", "failover-test-wrong-password").Err(); err != nil {
		t.Fatal(err)
	}
	if err := replica.ClientKillByFilter(ctx, "TYPE", "master").Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the replica's link down", func() bool {
		return strings.Contains(replica.Info(ctx, "replication").Val(), "master_link_status:down")
	})
}

func restoreReplication(t *testing.T, node *redis.Client) {
	t.Helper()
	if err := node.ConfigSet(context.Background(), "masterauth", "").Err(); err != nil {
		t.Fatal(err)
	}
}

// waitPromoted polls replica until it is a master and returns when.
func waitPromoted(t *testing.T, replica *redis.Client) time.Time {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		role, err := replica.Do(context.Background(), "ROLE").Slice()
		if err == nil && len(role) > 0 && role[0] == "master" {
			return time.Now()
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("the replica was not promoted within 20s")
	return time.Time{}
}
