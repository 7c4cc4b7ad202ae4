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
	"github.com/lockgen/lockgen/lua"
	"github.com/lockgen/lockgen/runtime"
)

// Review tests of grants across processes (grant.go, lua/grant_next.lua):
// the deadline invariant (design.md §7), mutual exclusion and liveness
// where a grant meets a local hand-off, a fault or a waiter that leaves.

// tryLockAsync is lockAsync with a wait and a lease of its own.
func tryLockAsync(ctx context.Context, m *runtime.Mutex, wait, lease time.Duration) chan lockResult {
	got := make(chan lockResult, 1)
	go func() {
		hctx, err := m.TryLock(ctx, wait, lease)
		got <- lockResult{hctx, err}
	}()
	return got
}

// lockFields returns the owner fields of the lock hash key.
func lockFields(t *testing.T, rdb *redis.Client, key string) []string {
	t.Helper()
	return rdb.HKeys(context.Background(), key).Val()
}

// A local hand-off whose reply is lost is resent, or settled, after the
// lock has meanwhile been granted to the very same waiter by another
// Client's release (grant_next.lua, lease cut to the waiter's 2 s record).
// The waiter must not take that grant as the hand-off: the hand-off's
// lease (10 s here, counted from the release's send) is far longer than
// the key's TTL, and another waiter takes the lock once the key expires.
func TestGrantReviewLostHandOffReplyMeetsARemoteGrant(t *testing.T) {
	skipShortOutsideCI(t)
	// resent: the releaser's retry reaches Redis after the grant
	// (handoff.lua's resend branch replies 2); settled: the releaser gives
	// up, and the waiter settles the unknown hand-off after the grant
	// (settle.lua finds its field).
	for _, settled := range []bool{false, true} {
		name := "resent"
		if settled {
			name = "settled"
		}
		t.Run(name, func(t *testing.T) { testLostHandOffMeetsARemoteGrant(t, settled) })
	}
}

func testLostHandOffMeetsARemoteGrant(t *testing.T, settled bool) {
	s := redistest.Start(t)
	plain := s.Client(t)
	ctx := ctxT(t)
	const key = "review-lost-handoff"
	const lease = 10 * time.Second

	p := faultproxy.Start(t, s.Addr())
	viaProxy := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, ReadTimeout: 100 * time.Millisecond, WriteTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { _ = viaProxy.Close() })
	releaseTimeout := 10 * time.Second
	if settled {
		releaseTimeout = time.Second
	}
	a := newClient(t, viaProxy, &runtime.Options{ReleaseTimeout: releaseTimeout})
	b := newClient(t, s.Client(t), nil)
	ma, mb := a.Mutex(key, runtime.LockOptions{}), b.Mutex(key, runtime.LockOptions{})

	// setupWait, not one try: A's first call (a dial, HELLO, NOSCRIPT,
	// SCRIPT LOAD through the proxy) overran its 100 ms ReadTimeout on a
	// loaded box ("acquire: redis unavailable: i/o timeout").
	held, err := ma.TryLock(ctx, setupWait, lease)
	if err != nil {
		t.Fatal(err)
	}
	// B's waiter V is the longest waiter, A's W next, B's V2 last (it
	// keeps B's hub on the channel, so B's release looks for a grantee).
	bctx, cancelB := context.WithCancel(ctx)
	defer cancelB()
	gotV := tryLockAsync(bctx, mb, runtime.Forever, lease)
	eventually(t, 5*time.Second, "V queued", func() bool { return queued(t, plain, key) == 1 })
	time.Sleep(5 * time.Millisecond)
	gotW := tryLockAsync(ctx, ma, runtime.Forever, lease)
	eventually(t, 5*time.Second, "W queued", func() bool { return queued(t, plain, key) == 2 })
	time.Sleep(5 * time.Millisecond)
	gotV2 := tryLockAsync(bctx, mb, runtime.Forever, lease)
	eventually(t, 5*time.Second, "V2 queued", func() bool { return queued(t, plain, key) == 3 })
	time.Sleep(50 * time.Millisecond) // W parked: A's release offers it the lock

	// The scripts are in the server's cache: a lost EVALSHA reply is then
	// a script that ran, not a NOSCRIPT.
	for _, sc := range []*redis.Script{lua.Handoff, lua.Acquire, lua.MutexLeave} {
		if err := sc.Load(ctx, plain).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// A's release runs in Redis (granting V, the head), but its replies
	// are lost until the heal.
	p.Blackhole(faultproxy.Downstream)
	released := make(chan error, 1)
	go func() { released <- ma.Unlock(held) }()
	hv := wantLock(t, gotV, 5*time.Second, "V, granted by A's release")
	if settled {
		p.Blackhole(faultproxy.Both) // no copy of A's release reaches Redis now
	}
	if err := mb.Unlock(hv); err != nil {
		t.Fatal(err)
	}
	// B's release granted the lock to A's W (its record is alive, A's
	// subscriptions still count): the hash names an owner of A's.
	eventually(t, 2*time.Second, "the lock granted to A's waiter", func() bool {
		f := lockFields(t, plain, key)
		return len(f) == 1 && strings.HasPrefix(f[0], a.ID()+":")
	})
	if settled {
		if err := <-released; err != nil {
			t.Logf("A's release: %v", err) // gave up: the hand-off's outcome is unknown
		}
		p.Heal() // W's settle gets through
	} else {
		p.Heal() // A's next copy of the release gets through
		if err := <-released; err != nil {
			t.Logf("A's release: %v", err)
		}
	}
	hw := wantLock(t, gotW, 10*time.Second, "W")
	pttl := plain.PTTL(ctx, key).Val()
	dl, ok := hw.Deadline()
	t.Logf("W's hold deadline in %v, the key expires in %v", time.Until(dl), pttl)
	if ok && time.Until(dl) > pttl+50*time.Millisecond {
		// The key expires first: B's V2, waiting all along, takes the lock
		// while W's hold ctx is live.
		select {
		case r := <-gotV2:
			if r.err == nil && hw.Err() == nil {
				t.Fatalf("two holders: B's V2 took the lock while W's hold ctx lives %v more", time.Until(dl))
			}
		case <-time.After(5 * time.Second):
		}
		t.Fatalf("W's hold deadline is %v after the key's expiry", time.Until(dl)-pttl)
	}
	_ = ma.Unlock(hw)
	cancelB()
	<-gotV2
}

// Short fixed leases (which claimGrant claims without a try of their own,
// lease <= the 2 s record) and watchdog leases, across several Clients:
// each hold's ctx deadline is never later than the key's expiry as Redis
// has it when the hold starts, and no two holds overlap.
func TestGrantReviewShortLeasesKeepTheDeadlineUnderContention(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lease time.Duration
		wd    time.Duration // WatchdogTimeout
	}{
		{"1s", time.Second, 0},
		{"2s", 2 * time.Second, 0},
		{"watchdog900ms", runtime.Watchdog, 900 * time.Millisecond},
		// A watchdog lease longer than the record: a grant cuts it.
		{"watchdog30s", runtime.Watchdog, 30 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Side by side (apart from other tests), a server each: the
			// deadline is compared with a PTTL read before it, so a delay
			// shrinks the excess measured and cannot fail the check; an
			// overlap needs a holder stalled past its lease (1 s or more).
			t.Parallel()
			testShortLeasesUnderContention(t, tc.lease, tc.wd)
		})
	}
}

func testShortLeasesUnderContention(t *testing.T, lease, wd time.Duration) {
	s := redistest.Start(t)
	plain := s.Client(t)
	ctx := ctxT(t)
	key := "review-short-" + lease.String() + "-" + wd.String()
	gw := watchGrants(t, s.Client(t), key)
	opts := &runtime.Options{WatchdogTimeout: wd}
	var (
		rec   intervals
		acqs  atomic.Int64
		worst atomic.Int64 // the largest (deadline - key expiry) seen, ns
		wg    sync.WaitGroup
	)
	worst.Store(-1 << 62)
	stop := time.Now().Add(1200 * time.Millisecond)
	for range 3 {
		c := newClient(t, s.Client(t), opts)
		m := c.Mutex(key, runtime.LockOptions{})
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(stop) {
					hctx, err := m.TryLock(ctx, 5*time.Second, lease)
					if err != nil {
						t.Error(err)
						return
					}
					start := time.Now()
					if dl, ok := hctx.Deadline(); ok && lease != runtime.Watchdog {
						// Read after the hold began: both sides shrink alike.
						pttl := plain.PTTL(ctx, key).Val()
						if over := time.Until(dl) - pttl; int64(over) > worst.Load() {
							worst.Store(int64(over))
						}
					}
					time.Sleep(300 * time.Microsecond)
					// Held until its deadline at most: a goroutine stalled
					// under load may find it passed before the ctx's timer
					// fired, and another holder in. Judged by the ctx's
					// error, that span overlapped the next.
					end := time.Now()
					deadline := runtime.HoldDeadline(c, hctx)
					lost := end.After(deadline)
					if lost {
						end = deadline
						if end.Before(start) {
							end = start // lost before it began: no span
						}
					}
					if err := m.Unlock(hctx); err != nil && !(lost && errors.Is(err, runtime.ErrLockLost)) {
						t.Error(err)
						return
					}
					rec.add(start, end)
					acqs.Add(1)
				}
			}()
		}
	}
	wg.Wait()
	t.Logf("%d holds, %d grants across", acqs.Load(), gw.grants.Load())
	if lease != runtime.Watchdog {
		t.Logf("latest deadline relative to the key's expiry: %v", time.Duration(worst.Load()))
	}
	if n := rec.overlaps(); n != 0 {
		t.Fatalf("%d overlapping holds", n)
	}
	// PTTL is read one round trip after the hold began, in whole ms.
	if over := time.Duration(worst.Load()); over > 5*time.Millisecond {
		t.Fatalf("a hold's deadline was %v past the key's expiry", over)
	}
	if gw.grants.Load() == 0 {
		t.Fatal("no grant across Clients: the test exercised nothing")
	}
	eventually(t, 5*time.Second, "no keys left", func() bool { return len(keysLeft(t, plain)) == 0 })
}

// A waiter whose ctx is cancelled as a grant comes to it (the release and
// the cancel race) never keeps the lock: the leave that ends its wait gives
// back a grant it never took, and the next waiters get the lock in turn.
//
// The give-back is not always done when TryLock returns. The leave gets
// leaveWithin (15 ms, package mutex) before the call returns; when its
// reply is later (a slow server, or a loaded box: 16-87 ms at load 10-18,
// even on the first round's NOSCRIPT and SCRIPT LOAD) the Client's settler
// goes on with it in the background. So what is checked is that once the
// leave is over (B's settler idle: at once when the leave was answered in
// time), no field of B is in the lock, long before the grant's lease (cut
// to the waiter's 2 s record) could have freed it. "slow" delays the
// traffic between B's Client and Redis by 100 ms each way from the release
// until B's TryLock has returned, so that every leave overruns leaveWithin
// and the settler's give-back is what is checked (the grant's message
// comes as late: B takes the grant only if the cancel runs that late).
func TestGrantReviewCancelRacingAGrantGivesItBack(t *testing.T) {
	skipShortOutsideCI(t)
	t.Run("fast", func(t *testing.T) { testCancelRacingAGrant(t, 0, 20) })
	t.Run("slow", func(t *testing.T) { testCancelRacingAGrant(t, 100*time.Millisecond, 8) })
}

func testCancelRacingAGrant(t *testing.T, latency time.Duration, rounds int) {
	s := redistest.Start(t)
	plain := s.Client(t)
	ctx := ctxT(t)
	const key = "review-cancel-race"
	// B's link: through a proxy whose latency is set for the release and
	// the leave only, so that the rounds queue their waiters as fast as
	// without it (at load 23, B's first round took over 5 s to queue
	// through 100 ms each way).
	p := faultproxy.Start(t, s.Addr())
	rdbB := redis.NewClient(&redis.Options{Addr: p.Addr()})
	t.Cleanup(func() { _ = rdbB.Close() })
	a, b, c := newClient(t, s.Client(t), nil), newClient(t, rdbB, nil), newClient(t, s.Client(t), nil)
	ma, mb, mc := a.Mutex(key, runtime.LockOptions{}), b.Mutex(key, runtime.LockOptions{}), c.Mutex(key, runtime.LockOptions{})
	// later: B's leave was left to its settler; grantedLater: with a grant
	// to give back in the lock when TryLock returned.
	// overtaken: A's waiter took the lock before C.
	var gaveBack, later, grantedLater, took, overtaken int
	for i := range rounds {
		held, err := ma.TryLock(ctx, 0, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		bctx, cancelB := context.WithCancel(ctx)
		gotB := tryLockAsync(bctx, mb, runtime.Forever, 10*time.Second)
		eventually(t, 5*time.Second, "B queued", func() bool { return queued(t, plain, key) == 1 })
		time.Sleep(2 * time.Millisecond)
		gotC := tryLockAsync(ctx, mc, runtime.Forever, 10*time.Second)
		eventually(t, 5*time.Second, "C queued", func() bool { return queued(t, plain, key) == 2 })
		// A's own waiter, last: A's release looks for a grantee.
		gotA := queueBehind(t, ctx, plain, ma, key, 3)
		time.Sleep(20 * time.Millisecond)

		p.Latency(faultproxy.Both, latency)
		go func() {
			time.Sleep(time.Duration(i%5) * 200 * time.Microsecond)
			cancelB()
		}()
		if err := ma.Unlock(held); err != nil {
			t.Fatal(err)
		}
		r := <-gotB
		if r.err == nil {
			took++
			p.Latency(faultproxy.Both, 0)
			if err := mb.Unlock(r.hctx); err != nil {
				t.Fatal(err)
			}
		} else {
			gaveBack++
			if !runtime.SettlerIdle(b) {
				later++ // the leave overran leaveWithin: the settler has it
				for _, f := range lockFields(t, plain, key) {
					if strings.HasPrefix(f, b.ID()+":") {
						grantedLater++ // and a grant to give back
					}
				}
			}
			p.Latency(faultproxy.Both, 0)
			eventually(t, 5*time.Second, "B's leave done", func() bool { return runtime.SettlerIdle(b) })
			for _, f := range lockFields(t, plain, key) {
				if strings.HasPrefix(f, b.ID()+":") {
					t.Fatalf("round %d: B gave up (%v) and left, yet its owner %s is in the lock", i, r.err, f)
				}
			}
		}
		// C and A's waiter get the lock one after the other. C, queued
		// first, is granted it first, but not every time: every
		// HandoffStreak-th release of a Client that may grant publishes
		// instead, for listeners Redis does not count (hub.HandoffStreak,
		// grant.go), and then the first waiter to try takes it. A's
		// waiter did so in round 19 of 1 in 40 runs, B's 16th release.
		for range 2 {
			select {
			case rc := <-gotC:
				if rc.err != nil {
					t.Fatalf("round %d: C: %v", i, rc.err)
				}
				if err := mc.Unlock(rc.hctx); err != nil {
					t.Fatal(err)
				}
				gotC = nil
			case ra := <-gotA:
				if ra.err != nil {
					t.Fatalf("round %d: A's waiter: %v", i, ra.err)
				}
				if gotC != nil {
					overtaken++
				}
				if err := ma.Unlock(ra.hctx); err != nil {
					t.Fatal(err)
				}
				gotA = nil
			case <-time.After(3 * time.Second):
				t.Fatalf("round %d: C (done: %v) or A's waiter (done: %v) did not get the lock within 3s", i, gotC == nil, gotA == nil)
			}
		}
		cancelB()
	}
	t.Logf("B took the lock %d times, gave up %d times (%d left in the background, %d with a grant); A's waiter went before C %d times",
		took, gaveBack, later, grantedLater, overtaken)
	if latency > 0 && grantedLater == 0 {
		t.Fatal("no leave of B with a grant to give back overran leaveWithin: the settler's give-back was not exercised")
	}
	eventually(t, 5*time.Second, "no keys left", func() bool { return len(keysLeft(t, plain)) == 0 })
}

// A grant whose message is lost (the grantee's pub/sub connection drops
// what Redis sends, while Redis still counts its subscriptions) is taken
// by the grantee's next try, before its record runs out: the lock goes to
// the grantee, not to the waiter behind it after an expiry.
func TestGrantReviewLostGrantMessageIsTakenByTheNextTry(t *testing.T) {
	s := redistest.Start(t)
	plain := s.Client(t)
	ctx := ctxT(t)
	const key = "review-lost-message"
	p := faultproxy.Start(t, s.Addr())
	viaProxy := redis.NewClient(&redis.Options{Addr: p.Addr()})
	t.Cleanup(func() { _ = viaProxy.Close() })
	a, b, c := newClient(t, s.Client(t), nil), newClient(t, viaProxy, nil), newClient(t, s.Client(t), nil)
	ma, mb, mc := a.Mutex(key, runtime.LockOptions{}), b.Mutex(key, runtime.LockOptions{}), c.Mutex(key, runtime.LockOptions{})

	held, err := ma.TryLock(ctx, 0, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	gotB := tryLockAsync(ctx, mb, runtime.Forever, 10*time.Second)
	eventually(t, 5*time.Second, "B queued", func() bool { return queued(t, plain, key) == 1 })
	time.Sleep(2 * time.Millisecond)
	gotC := tryLockAsync(ctx, mc, runtime.Forever, 10*time.Second)
	eventually(t, 5*time.Second, "C queued", func() bool { return queued(t, plain, key) == 2 })
	gotA := queueBehind(t, ctx, plain, ma, key, 3)
	subs := p.ConnsMatching("subscribe")
	if len(subs) == 0 {
		t.Fatal("no pub/sub connection of B through the proxy")
	}
	for _, sc := range subs {
		sc.Blackhole(faultproxy.Downstream)
	}
	if err := ma.Unlock(held); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Second, "the lock granted to B", func() bool {
		f := lockFields(t, plain, key)
		return len(f) == 1 && strings.HasPrefix(f[0], b.ID()+":")
	})
	var hb context.Context
	select {
	case r := <-gotB:
		if r.err != nil {
			t.Fatal(r.err)
		}
		hb = r.hctx
	case r := <-gotC:
		t.Fatalf("C got the lock (%v) before B took its grant", r.err)
	case <-time.After(3 * time.Second):
		t.Fatal("B never took its grant")
	}
	if ttl := plain.PTTL(ctx, key).Val(); ttl < 5*time.Second {
		t.Fatalf("PTTL %v after B took its grant, want its own 10 s lease", ttl)
	}
	for _, sc := range subs {
		sc.Heal()
	}
	if err := mb.Unlock(hb); err != nil {
		t.Fatal(err)
	}
	if err := mc.Unlock(wantLock(t, gotC, 3*time.Second, "C")); err != nil {
		t.Fatal(err)
	}
	if err := ma.Unlock(wantLock(t, gotA, 3*time.Second, "A's waiter")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "no keys left", func() bool { return len(keysLeft(t, plain)) == 0 })
}
