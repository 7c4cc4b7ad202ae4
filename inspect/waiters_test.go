package inspect_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/inspect"
	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/runtime"
)

// waiterClient is a Client named name that has held a lock once, so that
// its owner label is in Redis (a Client writes it at its first hold).
func waiterClient(t *testing.T, rdb redis.UniversalClient, name string) *runtime.Client {
	t.Helper()
	c := lockClient(t, rdb, runtime.Options{Name: name})
	ctx := context.Background()
	m := c.Mutex("warm-up:"+name, runtime.LockOptions{})
	h := hold(t, ctx, m)
	if err := m.Unlock(h); err != nil {
		t.Fatal(err)
	}
	labelled(t, rdb, c)
	return c
}

// wait starts a goroutine blocked in try until ctx ends, then waits until
// Redis shows it (cond).
func wait(t *testing.T, ctx context.Context, try func(context.Context) (context.Context, error), cond func() bool) {
	t.Helper()
	go func() { _, _ = try(ctx) }()
	waitFor(t, cond)
}

// tryLock is m's TryLock waiting forever (until ctx ends).
func tryLock(m *runtime.Mutex) func(context.Context) (context.Context, error) {
	return func(ctx context.Context) (context.Context, error) {
		return m.TryLock(ctx, runtime.Forever, runtime.Watchdog)
	}
}

// subscribers counts the connections subscribed to channel, on every node
// (classic and sharded pub/sub).
func subscribers(ctx context.Context, rdb redis.UniversalClient, channel string) int64 {
	count := func(node redis.UniversalClient) int64 {
		return node.PubSubNumSub(ctx, channel).Val()[channel] + node.PubSubShardNumSub(ctx, channel).Val()[channel]
	}
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		return count(rdb)
	}
	var n int64
	// One at a time: the callback runs concurrently per node.
	nodes := make(chan *redis.Client, 16)
	_ = cc.ForEachShard(ctx, func(_ context.Context, node *redis.Client) error { nodes <- node; return nil })
	close(nodes)
	for node := range nodes {
		n += count(node)
	}
	return n
}

// TestInspectShowsEveryWaiterRedisRecords: waiters of several Clients on
// every kind, each shown with its owner label where Redis records it (a
// reentrant lock's grant queue, a fair queue, waiting writers), and the
// rest said to be unrecorded, with the subscribers of their channel.
func TestInspectShowsEveryWaiterRedisRecords(t *testing.T) {
	s := redistest.Start(t)
	rdb := s.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	api := lockClient(t, rdb, runtime.Options{Name: "api"})
	w1, w2, w3 := waiterClient(t, rdb, "w1"), waiterClient(t, rdb, "w2"), waiterClient(t, rdb, "w3")
	// w4 has held nothing: it is labelled all the same, as a Client that waits.
	w4 := lockClient(t, rdb, runtime.Options{Name: "w4"})
	wctx, stopWaiters := context.WithCancel(ctx)
	defer stopWaiters()

	// OrderLock 42: held by api; 5 goroutines of 3 labelled Clients wait,
	// then one of w4. Each joins the grant queue before the next starts,
	// so the queue's order is the order below.
	order := func(c *runtime.Client) *runtime.Mutex {
		return c.Mutex("order:42", runtime.LockOptions{Name: "OrderLock"})
	}
	hold(t, ctx, order(api))
	for i, c := range []*runtime.Client{w1, w1, w2, w2, w3, w4} {
		wait(t, wctx, tryLock(order(c)), func() bool {
			return rdb.ZCard(ctx, "lockgen_lock_queue:{order:42}").Val() == int64(i+1)
		})
		time.Sleep(2 * time.Millisecond) // distinct scores (ms)
	}
	waitFor(t, func() bool { return subscribers(ctx, rdb, "redisson_lock__channel:{order:42}") == 4 })

	// InventoryLock sku-2 (fair): held by api, w1 and w4 queued.
	inv := func(c *runtime.Client) *runtime.Mutex {
		return c.FairLock("inventory:sku-2", runtime.LockOptions{Name: "InventoryLock"})
	}
	hold(t, ctx, inv(api))
	for i, c := range []*runtime.Client{w1, w4} {
		wait(t, wctx, tryLock(inv(c)), func() bool {
			return rdb.LLen(ctx, "redisson_lock_queue:{inventory:sku-2}").Val() == int64(i+1)
		})
	}

	// Catalog shop-2 (writers first): read by api; w2 waits to write (a
	// waiting writer is recorded), so w3's reader waits behind it (not).
	cat := func(c *runtime.Client) *runtime.RWLock {
		return c.ReadWrite("catalog:shop-2", runtime.LockOptions{Name: "Catalog", WritersFirst: true})
	}
	hold(t, ctx, cat(api).Read())
	wait(t, wctx, tryLock(cat(w2).Write()), func() bool {
		return rdb.ZCard(ctx, "lockgen_rwlock_writers:{catalog:shop-2}").Val() == 1
	})
	wait(t, wctx, tryLock(cat(w3).Read()), func() bool {
		return subscribers(ctx, rdb, "redisson_rwlock:{catalog:shop-2}") == 2
	})

	// PaymentSlots busy: api holds all 3 permits, w1 and w2 wait for one.
	slots := func(c *runtime.Client) *runtime.Semaphore {
		return c.Semaphore("payslots:busy", runtime.SemaphoreOptions{Name: "PaymentSlots", Permits: 3})
	}
	if _, err := slots(api).TryAcquire(ctx, 3, 0); err != nil {
		t.Fatal(err)
	}
	for i, c := range []*runtime.Client{w1, w2} {
		wait(t, wctx, func(ctx context.Context) (context.Context, error) { return slots(c).Acquire(ctx, 1) }, func() bool {
			return subscribers(ctx, rdb, "redisson_sc:{payslots:busy}") == int64(i+1)
		})
	}

	// ImportDone b3: armed with 1 by api, w3 awaits it.
	if armed, err := api.Latch("import:b3", runtime.LatchOptions{Name: "ImportDone", Count: 1}).Arm(ctx); err != nil || !armed {
		t.Fatalf("arm: %v, %v", armed, err)
	}
	w3Latch := w3.Latch("import:b3", runtime.LatchOptions{Name: "ImportDone", Count: 1})
	go func() { _ = w3Latch.Await(wctx) }()
	waitFor(t, func() bool {
		return subscribers(ctx, rdb, "redisson_countdownlatch__channel__{import:b3}") == 1
	})

	in := &inspect.Inspector{Spec: spec(t), Redis: rdb}
	get := func(lock string, params map[string]string) inspect.Instance {
		t.Helper()
		st, err := in.Instance(ctx, lock, params)
		if err != nil {
			t.Fatalf("%s %v: %v", lock, params, err)
		}
		return st
	}
	ord := get("OrderLock", map[string]string{"orderID": "42"})
	golden(t, "waiters-reentrant", table(t, ord))
	var names []string
	for i, w := range ord.Queue {
		names = append(names, w.Who.Name)
		if w.Since.IsZero() || w.Waited <= 0 || w.Deadline <= 0 {
			t.Errorf("waiter %d %+v: want when it first waited, how long ago, and its deadline", i+1, w)
		}
		if i > 0 && !w.Since.After(ord.Queue[i-1].Since) {
			t.Errorf("waiter %d since %v, not after the one ahead (%v)", i+1, w.Since, ord.Queue[i-1].Since)
		}
	}
	// w4 never held a lock: a Client that waits is labelled too.
	if strings.Join(names, ",") != "w1,w1,w2,w2,w3,w4" {
		t.Fatalf("OrderLock 42 waiters by name %q, want w1,w1,w2,w2,w3,w4", names)
	}
	if last := ord.Queue[5].Who; last.NoLabel || last.Redisson || last.Client != w4.ID() {
		t.Fatalf("w4's waiter: %+v, want lockgen's with its label", last)
	}
	if ord.Listening == nil || *ord.Listening != 4 {
		t.Fatalf("OrderLock 42 listening %v, want 4 (w1..w4)", ord.Listening)
	}
	var b bytes.Buffer
	_ = inspect.WriteJSON(&b, ord)
	golden(t, "waiters.json", b.String())
	// The hold's start is recorded nowhere: no since for holders, and the
	// Client's start is named as such.
	var raw struct {
		Holders []map[string]any
	}
	if err := json.Unmarshal(b.Bytes(), &raw); err != nil {
		t.Fatal(err)
	}
	who, _ := raw.Holders[0]["who"].(map[string]any)
	if _, ok := raw.Holders[0]["since"]; ok || who["since"] != nil || who["client_started"] == nil {
		t.Fatalf("holder %v: want no since, and client_started", raw.Holders[0])
	}

	fair := get("InventoryLock", map[string]string{"sku": "sku-2"})
	golden(t, "waiters-fair", table(t, fair))
	if len(fair.Queue) != 2 || fair.Queue[0].Who.Name != "w1" || fair.Queue[1].Who.Name != "w4" || fair.Unrecorded != "" {
		t.Fatalf("fair queue %+v (unrecorded %q): want w1, then w4; nothing unrecorded", fair.Queue, fair.Unrecorded)
	}
	rw := get("Catalog", map[string]string{"shopID": "shop-2"})
	golden(t, "waiters-readwrite", table(t, rw))
	if len(rw.Queue) != 1 || rw.Queue[0].Who.Name != "w2" || rw.Listening == nil || *rw.Listening != 2 {
		t.Fatalf("readwrite %+v: want w2's writer queued, 2 subscribers (w2, w3)", rw)
	}
	sem := get("PaymentSlots", map[string]string{"provider": "busy"})
	golden(t, "waiters-semaphore", table(t, sem))
	if len(sem.Permits) != 3 || sem.Listening == nil || *sem.Listening != 2 || sem.Unrecorded == "" {
		t.Fatalf("semaphore %+v: want 3 permits held, 2 subscribers, unrecorded waiters", sem)
	}
	latch := get("ImportDone", map[string]string{"batchID": "b3"})
	golden(t, "waiters-latch", table(t, latch))
	if latch.Listening == nil || *latch.Listening != 1 {
		t.Fatalf("latch listening %v, want 1", latch.Listening)
	}

	sum, err := in.Summary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b.Reset()
	_ = inspect.WriteSummary(&b, sum, inspect.DefaultLimit)
	golden(t, "waiters-summary", b.String())
	if sum[0].Lock != "OrderLock" || sum[0].Waiting != 6 {
		t.Fatalf("summary %+v: want OrderLock with 6 waiting", sum[0])
	}
	list, _, err := in.Instances(ctx, "OrderLock")
	if err != nil {
		t.Fatal(err)
	}
	b.Reset()
	_ = inspect.WriteInstances(&b, list, false, inspect.DefaultLimit)
	golden(t, "waiters-instances", b.String())
}

// TestInspectNamesTheProcessOfAWaiter: a waiter in another process is
// shown with that process's pid.
func TestInspectNamesTheProcessOfAWaiter(t *testing.T) {
	s := redistest.Start(t)
	rdb := s.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := lockClient(t, rdb, runtime.Options{Name: "api"})
	hold(t, ctx, c.Mutex("order:8", runtime.LockOptions{Name: "OrderLock"}))
	pid := startChild(t, s.Addr(), "wait") // holds order:7, waits for order:8
	in := &inspect.Inspector{Spec: spec(t), Redis: rdb}
	st, err := in.Instance(ctx, "OrderLock", map[string]string{"orderID": "8"})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Queue) != 1 || st.Queue[0].Who.PID != pid || st.Queue[0].Who.Name != "child" {
		t.Fatalf("queue %+v, want the child's waiter (pid %d)", st.Queue, pid)
	}
}

// TestInspectShowsWaitersOnACluster: on a cluster the fair queue is read
// from the lock's slot, a reentrant lock's waiters are not recorded (the
// runtime queues none there), and the subscribers of a channel are
// counted where sharded pub/sub keeps them.
func TestInspectShowsWaitersOnACluster(t *testing.T) {
	cl := redistest.StartCluster(t)
	rdb := cl.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	api := lockClient(t, rdb, runtime.Options{Name: "api"})
	w1, w2 := waiterClient(t, rdb, "w1"), waiterClient(t, rdb, "w2")
	wctx, stopWaiters := context.WithCancel(ctx)
	defer stopWaiters()

	order := func(c *runtime.Client) *runtime.Mutex {
		return c.Mutex("order:42", runtime.LockOptions{Name: "OrderLock"})
	}
	hold(t, ctx, order(api))
	for i, c := range []*runtime.Client{w1, w2} {
		wait(t, wctx, tryLock(order(c)), func() bool {
			return subscribers(ctx, rdb, "redisson_lock__channel:{order:42}") == int64(i+1)
		})
	}
	inv := func(c *runtime.Client) *runtime.Mutex {
		return c.FairLock("inventory:sku-1", runtime.LockOptions{Name: "InventoryLock"})
	}
	hold(t, ctx, inv(api))
	for i, c := range []*runtime.Client{w1, w2} {
		wait(t, wctx, tryLock(inv(c)), func() bool {
			return rdb.LLen(ctx, "redisson_lock_queue:{inventory:sku-1}").Val() == int64(i+1)
		})
	}
	slots := func(c *runtime.Client) *runtime.Semaphore {
		return c.Semaphore("payslots:busy", runtime.SemaphoreOptions{Name: "PaymentSlots", Permits: 3})
	}
	if _, err := slots(api).TryAcquire(ctx, 3, 0); err != nil {
		t.Fatal(err)
	}
	wait(t, wctx, func(ctx context.Context) (context.Context, error) { return slots(w1).Acquire(ctx, 1) }, func() bool {
		return subscribers(ctx, rdb, "redisson_sc:{payslots:busy}") == 1
	})

	in := &inspect.Inspector{Spec: spec(t), Redis: rdb}
	for _, tc := range []struct {
		golden, lock string
		params       map[string]string
		queued       int
		listening    int64 // -1: not counted
	}{
		{"cluster-reentrant", "OrderLock", map[string]string{"orderID": "42"}, 2, 2}, // sharded pub/sub: queued for grants
		{"cluster-fair", "InventoryLock", map[string]string{"sku": "sku-1"}, 2, -1},
		{"cluster-semaphore", "PaymentSlots", map[string]string{"provider": "busy"}, 0, 1},
	} {
		st, err := in.Instance(ctx, tc.lock, tc.params)
		if err != nil {
			t.Fatalf("%s: %v", tc.golden, err)
		}
		golden(t, tc.golden, table(t, st))
		listening := int64(-1)
		if st.Listening != nil {
			listening = *st.Listening
		}
		if len(st.Queue) != tc.queued || listening != tc.listening {
			t.Errorf("%s: %d queued, listening %d; want %d, %d", tc.golden, len(st.Queue), listening, tc.queued, tc.listening)
		}
		for _, w := range st.Queue {
			if w.Who.Name == "" {
				t.Errorf("%s: waiter %+v without its label", tc.golden, w)
			}
		}
	}
}

// TestInspectReadsALockWhereRedisRefusesToCountSubscribers: an ACL user
// without PUBSUB still sees the lock; only the count is left out.
func TestInspectReadsALockWhereRedisRefusesToCountSubscribers(t *testing.T) {
	s := redistest.Start(t)
	rdb := s.Client(t)
	ctx := context.Background()
	if err := rdb.Do(ctx, "ACL", "SETUSER", "oncall", "on", ">pw", "~*", "&*", "+@all", "-pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	c := lockClient(t, rdb, runtime.Options{Name: "api"})
	hold(t, ctx, c.Mutex("order:1", runtime.LockOptions{Name: "OrderLock"}))
	oncall := redis.NewClient(&redis.Options{Addr: s.Addr(), Username: "oncall", Password: "pw"})
	defer oncall.Close()
	if err := oncall.PubSubNumSub(ctx, "x").Err(); err == nil {
		t.Fatal("the ACL lets oncall run PUBSUB")
	}
	in := &inspect.Inspector{Spec: spec(t), Redis: oncall}
	st, err := in.Instance(ctx, "OrderLock", map[string]string{"orderID": "1"})
	if err != nil || !st.Held || st.Listening != nil || st.Holders[0].Who.Name != "api" {
		t.Fatalf("%+v, %v: want it held by api, no subscriber count", st, err)
	}
}
