package runtime_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/faultproxy"
	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/internal/runtimetest"
	"github.com/lockgen/lockgen/runtime"
)

// Grants across processes (grant.go): a release gives a reentrant lock to
// the longest waiting lockgen waiter of any Client and tells that Client
// only. Each Client here stands for a process.

// grantWatch counts, by pattern subscriptions (which PUBSUB NUMSUB does
// not count, so they change no release's choice), the grants published on
// key's grant channels and the unlock messages on its lock channel.
type grantWatch struct {
	grants, unlocks atomic.Int64
	last            atomic.Value // string: the last grant's payload
}

func watchGrants(t *testing.T, rdb *redis.Client, key string) *grantWatch {
	t.Helper()
	ctx := context.Background()
	ps := rdb.PSubscribe(ctx, "redisson_lock__channel:{"+key+"}:*", "redisson_lock__channel:{"+key+"}")
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	gw := &grantWatch{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for msg := range ps.Channel() {
			if strings.HasPrefix(msg.Channel, "redisson_lock__channel:{"+key+"}:") {
				gw.last.Store(msg.Payload)
				gw.grants.Add(1)
			} else {
				gw.unlocks.Add(1)
			}
		}
	}()
	t.Cleanup(func() { ps.Close(); <-done })
	return gw
}

// queued reports how many waiters lockgen's queue in Redis has for key.
func queued(t *testing.T, rdb *redis.Client, key string) int64 {
	t.Helper()
	return rdb.ZCard(context.Background(), "lockgen_lock_queue:{"+key+"}").Val()
}

type lockResult struct {
	hctx context.Context
	err  error
}

func lockAsync(ctx context.Context, m *runtime.Mutex) chan lockResult {
	got := make(chan lockResult, 1)
	go func() {
		hctx, err := m.Lock(ctx)
		got <- lockResult{hctx, err}
	}()
	return got
}

func wantLock(t *testing.T, got chan lockResult, within time.Duration, who string) context.Context {
	t.Helper()
	select {
	case r := <-got:
		if r.err != nil {
			t.Fatalf("%s: %v", who, r.err)
		}
		return r.hctx
	case <-time.After(within):
		t.Fatalf("%s did not get the lock within %v", who, within)
	}
	return nil
}

// A release by a Client that waited for the lock grants it to the longest
// waiter of the other Clients; only that waiter's Client hears of it. (A
// release by a Client that never waited on the lock publishes, as the
// first one here: it cannot know of waiters without a command more on
// every uncontended release.)
func TestGrantAcrossClientsGoesToTheLongestWaiterOnly(t *testing.T) {
	s := redistest.Start(t)
	plain := s.Client(t)
	ctx := ctxT(t)
	const key = "across"
	gw := watchGrants(t, s.Client(t), key)
	aRdb := s.Client(t)
	counted := &commandCounter{}
	aRdb.AddHook(counted)
	a, b, c := newClient(t, aRdb, nil), newClient(t, s.Client(t), nil), newClient(t, s.Client(t), nil)
	ma, mb, mc := a.Mutex(key, runtime.LockOptions{}), b.Mutex(key, runtime.LockOptions{}), c.Mutex(key, runtime.LockOptions{})

	held, err := ma.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	gotB := lockAsync(ctx, mb)
	eventually(t, 5*time.Second, "B queued", func() bool { return queued(t, plain, key) == 1 })
	if err := ma.Unlock(held); err != nil {
		t.Fatal(err)
	}
	hb := wantLock(t, gotB, 5*time.Second, "B")
	// The watch hears the messages on a connection of its own: wait for it.
	eventually(t, 2*time.Second, "A's release published", func() bool { return gw.unlocks.Load() == 1 })
	if n := gw.grants.Load(); n != 0 {
		t.Fatalf("%d grants; want A's release to publish", n)
	}

	gotC := lockAsync(ctx, mc)
	eventually(t, 5*time.Second, "C queued", func() bool { return queued(t, plain, key) == 1 })
	time.Sleep(5 * time.Millisecond) // places are by the millisecond
	gotA := lockAsync(ctx, ma)
	eventually(t, 5*time.Second, "A queued", func() bool { return queued(t, plain, key) == 2 })
	time.Sleep(20 * time.Millisecond)
	counted.start()
	if err := mb.Unlock(hb); err != nil {
		t.Fatal(err)
	}
	hc := wantLock(t, gotC, 5*time.Second, "C, the longest waiter")
	eventually(t, 2*time.Second, "the grant heard", func() bool { return gw.grants.Load() >= 1 })
	if n := gw.grants.Load(); n != 1 {
		t.Fatalf("%d grants published, want 1", n)
	}
	if p, _ := gw.last.Load().(string); !strings.HasPrefix(p, "2:"+c.ID()+":") {
		t.Fatalf("grant %q, want one to C's waiter", p)
	}
	if n := gw.unlocks.Load(); n != 1 {
		t.Fatalf("%d unlock messages: a grant wakes no one else", n)
	}
	time.Sleep(50 * time.Millisecond)
	if n := counted.n.Load(); n != 0 {
		t.Fatalf("A sent %d commands while C was granted the lock: it was woken", n)
	}
	select {
	case r := <-gotA:
		t.Fatalf("A got the lock while C holds it: %v", r.err)
	default:
	}
	if err := mc.Unlock(hc); err != nil {
		t.Fatal(err)
	}
	ha := wantLock(t, gotA, 5*time.Second, "A")
	if err := ma.Unlock(ha); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Second, "the second grant heard", func() bool { return gw.grants.Load() >= 2 })
	if n := gw.grants.Load(); n != 2 {
		t.Fatalf("%d grants, want 2", n)
	}
	eventually(t, 5*time.Second, "no keys left", func() bool { return len(keysLeft(t, plain)) == 0 })
}

// A subscriber that is not a lockgen Client queueing its waiters (a
// Redisson waiter, say) is never passed over: releases publish "0".
func TestGrantNeverPassesAForeignListener(t *testing.T) {
	s := redistest.Start(t)
	ctx := ctxT(t)
	const key = "foreign"
	gw := watchGrants(t, s.Client(t), key)
	foreign := s.Client(t).Subscribe(ctx, "redisson_lock__channel:{"+key+"}")
	defer foreign.Close()
	if _, err := foreign.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	clients := []*runtime.Client{newClient(t, s.Client(t), nil), newClient(t, s.Client(t), nil)}
	var releases atomic.Int64
	var wg sync.WaitGroup
	stop := time.Now().Add(500 * time.Millisecond)
	for _, c := range clients {
		m := c.Mutex(key, runtime.LockOptions{})
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(stop) {
					hctx, err := m.Lock(ctx)
					if err != nil {
						t.Error(err)
						return
					}
					time.Sleep(100 * time.Microsecond)
					if err := m.Unlock(hctx); err != nil {
						t.Error(err)
						return
					}
					releases.Add(1)
				}
			}()
		}
	}
	wg.Wait()
	if n := gw.grants.Load(); n != 0 {
		t.Fatalf("%d grants while a foreign client listened", n)
	}
	// Local hand-offs need the releaser's hub to be the only listener:
	// never here either, so every release published.
	eventually(t, 2*time.Second, "every release published", func() bool { return gw.unlocks.Load() >= releases.Load() })
}

// A waiter whose process died (its connections reset, no new ones) is
// skipped at once: its client's grant channel has no subscriber.
func TestGrantSkipsAKilledWaitersClient(t *testing.T) {
	s := redistest.Start(t)
	plain := s.Client(t)
	ctx, lag := ctxT(t), runtimetest.StartLagMeter(t)
	const key = "killed"
	a := newClient(t, s.Client(t), nil)
	p := faultproxy.Start(t, s.Addr())
	viaProxy := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = viaProxy.Close() })
	b := newClient(t, viaProxy, nil)
	c := newClient(t, s.Client(t), nil)

	held, err := a.Mutex(key, runtime.LockOptions{}).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bctx, cancelB := context.WithCancel(ctx)
	defer cancelB()
	gotB := lockAsync(bctx, b.Mutex(key, runtime.LockOptions{}))
	eventually(t, 5*time.Second, "B queued", func() bool { return queued(t, plain, key) == 1 })
	time.Sleep(5 * time.Millisecond)
	gotC := lockAsync(ctx, c.Mutex(key, runtime.LockOptions{}))
	eventually(t, 5*time.Second, "C queued", func() bool { return queued(t, plain, key) == 2 })
	gotA := queueBehind(t, ctx, plain, a.Mutex(key, runtime.LockOptions{}), key, 3)

	// B's process dies.
	p.RefuseNew(true)
	p.Reset()
	eventually(t, 5*time.Second, "B's subscription gone", func() bool {
		ch := "redisson_lock__channel:{" + key + "}:" + b.ID()
		return plain.PubSubNumSub(ctx, ch).Val()[ch] == 0
	})
	start := time.Now()
	if err := a.Mutex(key, runtime.LockOptions{}).Unlock(held); err != nil {
		t.Fatal(err)
	}
	hc := wantLock(t, gotC, 5*time.Second, "C")
	if d := time.Since(start); d > 500*time.Millisecond+lag.Worst(start, start.Add(d)) {
		t.Fatalf("C got the lock %v after the release: the dead waiter held it up", d)
	}
	if err := c.Mutex(key, runtime.LockOptions{}).Unlock(hc); err != nil {
		t.Fatal(err)
	}
	ha := wantLock(t, gotA, 5*time.Second, "A's second waiter")
	if err := a.Mutex(key, runtime.LockOptions{}).Unlock(ha); err != nil {
		t.Fatal(err)
	}
	cancelB()
	if r := <-gotB; r.err == nil {
		t.Fatal("the dead waiter got the lock")
	}
}

// queueBehind queues a waiter of m behind the n-1 queued already and
// returns its result: the releasing Client then waits on the lock too, so
// its release looks for a waiter to grant it to (grant.go).
func queueBehind(t *testing.T, ctx context.Context, plain *redis.Client, m *runtime.Mutex, key string, n int64) chan lockResult {
	t.Helper()
	time.Sleep(5 * time.Millisecond) // places are by the millisecond
	got := lockAsync(ctx, m)
	eventually(t, 5*time.Second, "the releaser's own waiter queued", func() bool { return queued(t, plain, key) == n })
	return got
}

// A grant made to a waiter cut off from Redis with its connection still
// open (counted as listening) holds the lock no longer than the waiter's
// record: the next waiter gets it within seconds, and the two never both
// hold it.
func TestGrantToACutOffWaiterIsBoundedByItsRecord(t *testing.T) {
	skipShortOutsideCI(t)
	t.Parallel() // a server of its own; its bounds are seconds
	s := redistest.Start(t)
	plain := s.Client(t)
	ctx := ctxT(t)
	const key = "cutoff"
	a := newClient(t, s.Client(t), nil)
	p := faultproxy.Start(t, s.Addr())
	viaProxy := redis.NewClient(&redis.Options{Addr: p.Addr()})
	t.Cleanup(func() { _ = viaProxy.Close() })
	b := newClient(t, viaProxy, nil)
	c := newClient(t, s.Client(t), nil)

	var holders atomic.Int32
	var overlap atomic.Bool
	hold := func(m *runtime.Mutex, hctx context.Context) {
		if holders.Add(1) > 1 {
			overlap.Store(true)
		}
		time.Sleep(10 * time.Millisecond)
		holders.Add(-1)
		_ = m.Unlock(hctx)
	}
	held, err := a.Mutex(key, runtime.LockOptions{}).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	holders.Add(1)
	bctx, cancelB := context.WithCancel(ctx)
	defer cancelB()
	mb := b.Mutex(key, runtime.LockOptions{})
	gotB := lockAsync(bctx, mb)
	eventually(t, 5*time.Second, "B queued", func() bool { return queued(t, plain, key) == 1 })
	time.Sleep(5 * time.Millisecond)
	mc := c.Mutex(key, runtime.LockOptions{})
	gotC := lockAsync(ctx, mc)
	eventually(t, 5*time.Second, "C queued", func() bool { return queued(t, plain, key) == 2 })
	ma := a.Mutex(key, runtime.LockOptions{})
	gotA := queueBehind(t, ctx, plain, ma, key, 3)
	gw := watchGrants(t, s.Client(t), key)

	p.Blackhole(faultproxy.Both) // B is cut off; Redis still counts it
	start := time.Now()
	holders.Add(-1)
	if err := a.Mutex(key, runtime.LockOptions{}).Unlock(held); err != nil {
		t.Fatal(err)
	}
	// The grant to B runs out silently; C and A's second waiter both try
	// then (key tracking, or their 1 s sleeps), in either order.
	var first lockResult
	var second chan lockResult
	mFirst, mSecond := mc, ma
	select {
	case first = <-gotC:
		second = gotA
	case first = <-gotA:
		second, mFirst, mSecond = gotC, ma, mc
	case <-time.After(6 * time.Second):
		t.Fatal("no one got the lock within 6s of the release")
	}
	if first.err != nil {
		t.Fatal(first.err)
	}
	t.Logf("the next waiter got the lock %v after the release", time.Since(start))
	if p, _ := gw.last.Load().(string); !strings.HasPrefix(p, "2:"+b.ID()+":") {
		t.Fatalf("first grant %q, want the one to B, cut off", p)
	}
	hold(mFirst, first.hctx)
	hold(mSecond, wantLock(t, second, 6*time.Second, "the other waiter"))
	p.Heal()
	select {
	case r := <-gotB:
		if r.err == nil {
			hold(mb, r.hctx)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("B never got the lock after the heal")
	}
	if overlap.Load() {
		t.Fatal("two holders at once")
	}
}

// Waiters of several Clients (processes) on one lock: mutual exclusion,
// the lock shared about evenly, grants made, and nothing left behind.
func TestGrantAcrossClientsUnderContention(t *testing.T) {
	s := redistest.Start(t)
	plain := s.Client(t)
	ctx := ctxT(t)
	const key = "contended"
	gw := watchGrants(t, s.Client(t), key)
	var (
		holders atomic.Int32
		got     [4][4]atomic.Int64
		wg      sync.WaitGroup
	)
	stop := time.Now().Add(1500 * time.Millisecond)
	for i := range 4 {
		m := newClient(t, s.Client(t), nil).Mutex(key, runtime.LockOptions{})
		for j := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(stop) {
					hctx, err := m.Lock(ctx)
					if err != nil {
						t.Error(err)
						return
					}
					if holders.Add(1) != 1 {
						t.Error("two holders at once")
					}
					got[i][j].Add(1)
					time.Sleep(200 * time.Microsecond)
					holders.Add(-1)
					if err := m.Unlock(hctx); err != nil {
						t.Error(err)
						return
					}
					time.Sleep(time.Millisecond)
				}
			}()
		}
	}
	wg.Wait()
	var total, fewest int64 = 0, 1 << 62
	for i := range got {
		for j := range got[i] {
			n := got[i][j].Load()
			total += n
			fewest = min(fewest, n)
		}
	}
	t.Logf("%d acquisitions, fewest by one worker %d, %d grants across", total, fewest, gw.grants.Load())
	if fewest*16*3 < total {
		t.Fatalf("a worker got %d of %d acquisitions: below a third of its share", fewest, total)
	}
	eventually(t, 2*time.Second, "a grant across Clients", func() bool { return gw.grants.Load() > 0 })
	eventually(t, 5*time.Second, "no keys left", func() bool { return len(keysLeft(t, plain)) == 0 })
}

// A waiter that gives up leaves the queue at once (it was in it while it
// waited), and the next waiter is granted the lock. (A grant the leaver
// never took is given back: TestGrantReviewCancelRacingAGrantGivesItBack.)
func TestGrantWaiterThatGivesUpLeavesTheQueue(t *testing.T) {
	s := redistest.Start(t)
	plain := s.Client(t)
	ctx := ctxT(t)
	const key = "giveup"
	a, b, c := newClient(t, s.Client(t), nil), newClient(t, s.Client(t), nil), newClient(t, s.Client(t), nil)
	held, err := a.Mutex(key, runtime.LockOptions{}).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	gotB := tryLockAsync(ctx, b.Mutex(key, runtime.LockOptions{}), 300*time.Millisecond, runtime.Watchdog)
	eventually(t, 5*time.Second, "B queued", func() bool { return queued(t, plain, key) == 1 })
	if r := <-gotB; !errors.Is(r.err, runtime.ErrNotAcquired) {
		t.Fatalf("TryLock = %v, want ErrNotAcquired", r.err)
	}
	// Its leave gets leaveWithin in the call, then goes on in the
	// settler: a loaded box may finish it after TryLock returned.
	eventually(t, 2*time.Second, "the waiter left the queue", func() bool { return queued(t, plain, key) == 0 })
	gotC := lockAsync(ctx, c.Mutex(key, runtime.LockOptions{}))
	eventually(t, 5*time.Second, "C queued", func() bool { return queued(t, plain, key) == 1 })
	if err := a.Mutex(key, runtime.LockOptions{}).Unlock(held); err != nil {
		t.Fatal(err)
	}
	hc := wantLock(t, gotC, 2*time.Second, "C")
	if err := c.Mutex(key, runtime.LockOptions{}).Unlock(hc); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "no keys left", func() bool { return len(keysLeft(t, plain)) == 0 })
}

// A hold that came through the queue grants on at its release even when
// its Client stopped waiting on the lock long before (its subscription
// lingers 250 ms): a long hold does not end in an unlock message to every
// process.
func TestGrantAfterALongHoldOfAQueuedWaiter(t *testing.T) {
	s := redistest.Start(t)
	plain := s.Client(t)
	ctx := ctxT(t)
	const key = "longhold"
	gw := watchGrants(t, s.Client(t), key)
	a, b, c := newClient(t, s.Client(t), nil), newClient(t, s.Client(t), nil), newClient(t, s.Client(t), nil)
	ma, mb, mc := a.Mutex(key, runtime.LockOptions{}), b.Mutex(key, runtime.LockOptions{}), c.Mutex(key, runtime.LockOptions{})

	held, err := ma.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	gotB := lockAsync(ctx, mb)
	eventually(t, 5*time.Second, "B waiting", func() bool { return waitersOn(t, plain, key) == 1 })
	gotC := lockAsync(ctx, mc)
	eventually(t, 5*time.Second, "B and C queued", func() bool { return queued(t, plain, key) == 2 })
	if err := ma.Unlock(held); err != nil { // A never waited: it publishes
		t.Fatal(err)
	}
	second, mFirst, mSecond := gotC, mb, mc
	var r lockResult
	select {
	case r = <-gotB:
	case r = <-gotC:
		second, mFirst, mSecond = gotB, mc, mb
	case <-time.After(5 * time.Second):
		t.Fatal("no one got the lock")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	gotA := lockAsync(ctx, ma) // queued behind the other
	eventually(t, 5*time.Second, "A queued", func() bool { return queued(t, plain, key) == 2 })
	time.Sleep(400 * time.Millisecond) // the holder's own subscription is gone by now
	before := gw.unlocks.Load()
	if err := mFirst.Unlock(r.hctx); err != nil {
		t.Fatal(err)
	}
	h2 := wantLock(t, second, 5*time.Second, "the waiter queued first")
	eventually(t, 2*time.Second, "the grant heard", func() bool { return gw.grants.Load() >= 1 })
	if n := gw.unlocks.Load() - before; n != 0 {
		t.Fatalf("%d unlock messages: the long hold's release published instead of granting", n)
	}
	if err := mSecond.Unlock(h2); err != nil {
		t.Fatal(err)
	}
	ha := wantLock(t, gotA, 5*time.Second, "A")
	if err := ma.Unlock(ha); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "no keys left", func() bool { return len(keysLeft(t, plain)) == 0 })
}
