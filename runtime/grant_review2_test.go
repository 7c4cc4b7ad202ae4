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
	"github.com/lockgen/lockgen/runtime"
)

// Second review of grants (grant.go, fair.go): a watchdog hold claimed
// from a grant whose lease was cut (claimGrant: only the cut is confirmed,
// the watchdog renews it at its next tick), and the queue records a
// release leaves alone when neither it nor its local grantee was queued
// (handoff.lua ARGV[8]).

// clientField returns the field of the lock hash (or of a grants hash) that
// belongs to Client c, "" if none.
func clientField(t *testing.T, rdb *redis.Client, key string, c *runtime.Client) (field, value string) {
	t.Helper()
	for f, v := range rdb.HGetAll(context.Background(), key).Val() {
		if strings.HasPrefix(f, c.ID()+":") {
			return f, v
		}
	}
	return "", ""
}

// waitChange polls (tightly: a try is what it waits for) until the field
// of Client c in the hash key has a value other than before: c's waiter
// tried again.
func waitChange(t *testing.T, rdb *redis.Client, key string, c *runtime.Client, before string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, v := clientField(t, rdb, key, c); v != before && v != "" && v != "granted" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new try of %s's waiter within 5s", c.ID())
		}
		time.Sleep(500 * time.Microsecond)
	}
}

// survives reports how a hold's ctx fares for d: nil if it lives on, else
// its cause.
func survives(hctx context.Context, d time.Duration) error {
	select {
	case <-hctx.Done():
		return context.Cause(hctx)
	case <-time.After(d):
		return nil
	}
}

// A fair lock's grant is cut to the grantee's queue record (its last try +
// QueueTimeout, fair_next.lua). A watchdog waiter claims it with only that
// confirmed and leaves the renewal to the watchdog's next tick (up to
// 500 ms with the default 30 s WatchdogTimeout). With a QueueTimeout
// shorter than a tick plus a round trip, the hold's deadline comes before
// the first renewal: a watchdog hold on a healthy server is lost moments
// after Lock returned it. (Before aaf8c81 the waiter did not claim such a
// grant: its next try, at once, took it with the whole lease.)
func TestGrantReview2FairShortQueueTimeoutKeepsAGrantedWatchdogHold(t *testing.T) {
	skipShortOutsideCI(t)
	t.Parallel() // a server of its own; it waits a second per round
	s := redistest.Start(t)
	plain := s.Client(t)
	ctx := ctxT(t)
	const key = "review2-fair-short-queue-timeout"
	gw := watchGrants(t, s.Client(t), key)
	opts := runtime.LockOptions{QueueTimeout: 300 * time.Millisecond}
	a, b := newClient(t, s.Client(t), nil), newClient(t, s.Client(t), nil)
	fa, fb := a.FairLock(key, opts), b.FairLock(key, opts)
	const rounds = 10
	lost := 0
	for i := range rounds {
		held, err := fa.TryLock(ctx, 0, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		gotB := lockAsync(ctx, fb) // the watchdog lease
		records := "lockgen_fair_grants:{" + key + "}"
		eventually(t, 5*time.Second, "B registered for grants", func() bool {
			f, v := clientField(t, plain, records, b)
			return f != "" && v != "granted"
		})
		// Release just after one of B's tries (its nonce changed): B claims
		// the grant, its last try being moments old.
		_, before := clientField(t, plain, records, b)
		waitChange(t, plain, records, b, before)
		if err := fa.Unlock(held); err != nil {
			t.Fatal(err)
		}
		hb := wantLock(t, gotB, 3*time.Second, "B")
		if cause := survives(hb, time.Second); cause != nil {
			lost++
			t.Logf("round %d: B's watchdog hold lost within %v of its grant: %v", i, time.Second, cause)
		}
		if err := fb.Unlock(hb); err != nil && !errors.Is(err, runtime.ErrLockLost) {
			t.Fatal(err)
		}
		eventually(t, 3*time.Second, "the lock free", func() bool { return plain.Exists(ctx, key).Val() == 0 })
	}
	t.Logf("%d grants in %d rounds", gw.grants.Load(), rounds)
	if gw.grants.Load() == 0 {
		t.Fatal("no grant: the test exercised nothing")
	}
	if lost > 0 {
		t.Fatalf("%d of %d watchdog holds taken by a grant were lost within %v on a healthy server (QueueTimeout %v)", lost, rounds, time.Second, opts.QueueTimeout)
	}
}

// grantToB sets up one grant across Clients: A holds key, B's waiter (the
// watchdog lease) is the longest in lockgen's queue, A's own waiter is
// behind it (so A's release looks for a grantee), and A releases just
// after one of B's tries ran in Redis: B claims the grant, cut to its 2 s
// record, with that try moments old. It returns B's hold and A's waiter.
func grantToB(t *testing.T, ctx context.Context, plain *redis.Client, key string, a, b *runtime.Client, before func()) (context.Context, chan lockResult) {
	t.Helper()
	ma, mb := a.Mutex(key, runtime.LockOptions{}), b.Mutex(key, runtime.LockOptions{})
	held, err := ma.TryLock(ctx, 0, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	gotB := lockAsync(ctx, mb)
	eventually(t, 5*time.Second, "B queued", func() bool { return queued(t, plain, key) == 1 })
	gotA := queueBehind(t, ctx, plain, ma, key, 2)
	records := "lockgen_lock_grants:{" + key + "}"
	_, last := clientField(t, plain, records, b)
	waitChange(t, plain, records, b, last)
	if before != nil {
		before()
	}
	if err := ma.Unlock(held); err != nil {
		t.Fatal(err)
	}
	hb := wantLock(t, gotB, 3*time.Second, "B")
	return hb, gotA
}

// A watchdog hold claimed from a grant has only the grant's cut (2 s from
// its last try) confirmed. When its first renewal is lost (B's command and
// renewal connections blackholed, its pub/sub connection alive, so the
// grant reaches it), its ctx must end before Redis expires the key
// (design.md §7), and then the next waiter gets the lock.
func TestGrantReview2GrantedHoldEndsBeforeItsKeyWhenTheRenewalIsLost(t *testing.T) {
	skipShortOutsideCI(t)
	// A server of its own; what it checks is an order (the hold ends
	// before its key), which no load may break.
	t.Parallel()
	s := redistest.Start(t)
	plain := s.Client(t)
	ctx := ctxT(t)
	const key = "review2-renewal-lost"
	p := faultproxy.Start(t, s.Addr())
	viaProxy := redis.NewClient(&redis.Options{Addr: p.Addr()})
	t.Cleanup(func() { _ = viaProxy.Close() })
	var renewed atomic.Int64
	// A 3 s watchdog: longer than the 2 s record, so the grant is cut, and
	// a 50 ms tick, so the renewal comes at once.
	b := newClient(t, viaProxy, &runtime.Options{WatchdogTimeout: 3 * time.Second, ReleaseTimeout: time.Second,
		Observer: runtime.ObserverFunc(func(e runtime.Event) {
			if e.Kind == runtime.EventRenewed && e.Renewed > 0 {
				renewed.Add(1)
			}
		})})
	a := newClient(t, s.Client(t), nil)
	// B's renewal connection exists before the grant, so it can be
	// blackholed with the command connections.
	warm, err := b.Mutex("review2-warm", runtime.LockOptions{}).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "a renewal of B's", func() bool { return renewed.Load() > 0 })
	// The warm-up's release has B's 1 s ReleaseTimeout (kept: it is also
	// the bound of B's tries in the scenario). A loaded box overran it
	// ("release: outcome unknown": no reply by the end of the call); the
	// release then finishes in the background: wait for the key to go.
	if err := b.Mutex("review2-warm", runtime.LockOptions{}).Unlock(warm); err != nil && !errors.Is(err, runtime.ErrOutcomeUnknown) {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the warm-up's lock free", func() bool { return plain.Exists(ctx, "review2-warm").Val() == 0 })

	hb, gotA := grantToB(t, ctx, plain, key, a, b, func() {
		// New connections are refused too: one dialled after a
		// blackholed call timed out would carry the renewal (in a full
		// run, B's hold lived on 5 s after the grant).
		p.RefuseNew(true)
		subs := map[*faultproxy.Conn]bool{}
		for _, c := range p.ConnsMatching("subscribe") {
			subs[c] = true
		}
		for _, c := range p.Conns() {
			if !subs[c] {
				c.Blackhole(faultproxy.Both)
			}
		}
	})
	t0 := time.Now()
	pttl := plain.PTTL(ctx, key).Val()
	expiry := t0.Add(pttl) // no later than Redis's: read after t0
	f, _ := clientField(t, plain, key, b)
	if f == "" {
		t.Fatalf("B holds the lock, but its field is not in it: %v", lockFields(t, plain, key))
	}
	if pttl > 2*time.Second {
		t.Fatalf("PTTL %v after the grant to B; want it cut to B's 2 s record", pttl)
	}
	select {
	case <-hb.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("B's hold lives on 5 s after the grant, its renewal lost")
	}
	if !errors.Is(context.Cause(hb), runtime.ErrLockLost) {
		t.Fatalf("B's hold ended with %v, want ErrLockLost", context.Cause(hb))
	}
	// The order is judged by the deadline the lease clock ended the hold
	// at, not by when this goroutine saw the ctx done: on a loaded box it
	// ran tens of ms late, past the 25 ms of drift between the two.
	deadline := runtime.HoldDeadline(b, hb)
	t.Logf("B's hold's deadline %v before the key's expiry (PTTL %v at the grant)", expiry.Sub(deadline), pttl)
	if deadline.IsZero() || deadline.After(expiry) {
		t.Fatalf("B's hold's deadline %v after the key expired", deadline.Sub(expiry))
	}
	ha := wantLock(t, gotA, 5*time.Second, "A's waiter, once B's grant ran out")
	p.Heal()
	if err := b.Mutex(key, runtime.LockOptions{}).Unlock(hb); !errors.Is(err, runtime.ErrLockLost) {
		t.Fatalf("B's release of its lost hold: %v, want ErrLockLost", err)
	}
	if err := a.Mutex(key, runtime.LockOptions{}).Unlock(ha); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "no keys left", func() bool {
		for _, k := range keysLeft(t, plain) {
			if !strings.HasPrefix(k, "lockgen_lock_hubs:") {
				return false
			}
		}
		return true
	})
}

// A hold claimed from a cut grant, before its first renewal: a re-entry
// applies the watchdog's whole lease (the key's TTL is no longer the cut),
// and the releases that follow clear every record (the grant's mark, the
// queue); a hold whose field is deleted meanwhile is lost at once (a
// renewal finds the field gone), not kept to its deadline.
func TestGrantReview2GrantedHoldReentersAndIsLostWhenItsFieldGoes(t *testing.T) {
	skipShortOutsideCI(t)
	t.Parallel() // servers of its own; its bounds are hundreds of ms or more
	t.Run("reenter", func(t *testing.T) {
		s := redistest.Start(t)
		plain := s.Client(t)
		ctx := ctxT(t)
		const key = "review2-reenter"
		a, b := newClient(t, s.Client(t), nil), newClient(t, s.Client(t), nil)
		mb := b.Mutex(key, runtime.LockOptions{})
		hb, gotA := grantToB(t, ctx, plain, key, a, b, nil)
		hn, err := mb.Lock(hb)
		if err != nil {
			t.Fatal(err)
		}
		f, v := clientField(t, plain, key, b)
		if v != "2" {
			t.Fatalf("B's field %q = %q after the re-entry, want 2", f, v)
		}
		if pttl := plain.PTTL(ctx, key).Val(); pttl < 20*time.Second {
			t.Fatalf("PTTL %v after a watchdog re-entry, want the watchdog's 30 s", pttl)
		}
		if err := mb.Unlock(hn); err != nil {
			t.Fatal(err)
		}
		if cause := survives(hb, time.Second); cause != nil {
			t.Fatalf("B's outer hold lost after the re-entry's release: %v", cause)
		}
		if err := mb.Unlock(hb); err != nil {
			t.Fatal(err)
		}
		ha := wantLock(t, gotA, 3*time.Second, "A's waiter")
		if n := queued(t, plain, key); n != 0 {
			t.Fatalf("%d records left in the queue with no one waiting", n)
		}
		if f, v := clientField(t, plain, "lockgen_lock_grants:{"+key+"}", b); f != "" {
			t.Fatalf("B's grant record %q = %q left after its release", f, v)
		}
		if err := a.Mutex(key, runtime.LockOptions{}).Unlock(ha); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("field gone", func(t *testing.T) {
		s := redistest.Start(t)
		plain := s.Client(t)
		ctx := ctxT(t)
		const key = "review2-field-gone"
		a, b := newClient(t, s.Client(t), nil), newClient(t, s.Client(t), nil)
		hb, gotA := grantToB(t, ctx, plain, key, a, b, nil)
		f, _ := clientField(t, plain, key, b)
		if f == "" {
			t.Fatal("the lock is not B's after the grant")
		}
		plain.HDel(ctx, key, f) // the grant's only field: the lock is free
		start := time.Now()
		select {
		case <-hb.Done():
		case <-time.After(3 * time.Second):
			t.Fatal("B's hold lives on 3 s after its field was deleted")
		}
		t.Logf("B's hold ended %v after its field was deleted", time.Since(start))
		if !errors.Is(context.Cause(hb), runtime.ErrLockLost) {
			t.Fatalf("B's hold ended with %v, want ErrLockLost", context.Cause(hb))
		}
		if !strings.Contains(context.Cause(hb).Error(), "no longer holds") {
			t.Fatalf("B's hold ended by %v; want a renewal to find the field gone", context.Cause(hb))
		}
		ha := wantLock(t, gotA, 5*time.Second, "A's waiter")
		if err := a.Mutex(key, runtime.LockOptions{}).Unlock(ha); err != nil {
			t.Fatal(err)
		}
	})
}

// Records in lockgen's queue after churn (handoff.lua ARGV[8]: a release
// looks at the queue only when it or its local grantee was queued there,
// or another Client listens): Clients A and B contend, with waiters that
// give up after a short wait among them, then B stops and A goes on alone
// (its releases then pass ARGV[8] by their flags), then A stops too. Once
// every acquisition has returned and been released, no record is left
// for an owner that neither holds nor waits: a later grant would give the
// lock to it and stall the lock until the record's life ran out.
func TestGrantReview2ChurnLeavesNoQueueRecord(t *testing.T) {
	s := redistest.Start(t)
	plain := s.Client(t)
	ctx := ctxT(t)
	const key = "review2-churn"
	gw := watchGrants(t, s.Client(t), key)
	a, b := newClient(t, s.Client(t), nil), newClient(t, s.Client(t), nil)
	ma, mb := a.Mutex(key, runtime.LockOptions{}), b.Mutex(key, runtime.LockOptions{})
	var (
		wg     sync.WaitGroup
		gaveUp atomic.Int64
		holds  atomic.Int64
		across atomic.Int64
	)
	work := func(m *runtime.Mutex, until time.Time, i int) {
		defer wg.Done()
		for n := 0; time.Now().Before(until); n++ {
			wait := runtime.Forever
			if (n+i)%4 == 3 {
				wait = time.Duration(1+n%5) * time.Millisecond // gives up, often while queued
			}
			hctx, err := m.TryLock(ctx, wait, 5*time.Second)
			if errors.Is(err, runtime.ErrNotAcquired) {
				gaveUp.Add(1)
				continue
			}
			if wait != runtime.Forever && (errors.Is(err, runtime.ErrOutcomeUnknown) || errors.Is(err, runtime.ErrUnavailable)) {
				// A try still without a reply when its wait of a few ms
				// ended (a full run beside other work, load 4: "redis
				// unavailable: outcome unknown"): the Client resolves its
				// late reply, and what is checked below (no record left)
				// covers that too.
				gaveUp.Add(1)
				continue
			}
			if err != nil {
				t.Error(err)
				return
			}
			holds.Add(1)
			time.Sleep(200 * time.Microsecond)
			if err := m.Unlock(hctx); err != nil {
				t.Error(err)
				return
			}
		}
	}
	start := time.Now()
	for i := range 3 {
		wg.Add(1)
		go work(ma, start.Add(1200*time.Millisecond), i)
	}
	for i := range 2 {
		wg.Add(1)
		go work(mb, start.Add(500*time.Millisecond), i)
	}
	wg.Wait()
	across.Store(gw.grants.Load())
	t.Logf("%d holds, %d waits given up, %d grants across", holds.Load(), gaveUp.Load(), across.Load())
	if n := queued(t, plain, key); n != 0 {
		t.Fatalf("%d records left in lockgen's queue with no one waiting: %v", n,
			plain.ZRange(ctx, "lockgen_lock_queue:{"+key+"}", 0, -1).Val())
	}
	if recs := plain.HGetAll(ctx, "lockgen_lock_grants:{"+key+"}").Val(); len(recs) != 0 {
		t.Fatalf("grant records left with no one waiting: %v", recs)
	}
	if gaveUp.Load() == 0 {
		t.Fatal("no wait was given up: the test exercised less than it should")
	}
}
