package runtime_test

import (
	"context"
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

// Hand-offs while the network between a Client and Redis drops packets,
// resets connections and delays them: the reentrant lock's local hand-off
// (one Client through the proxy) and the fair lock's grant between two
// Clients (one through the proxy, one direct). A holder's span runs from
// Lock's return to its Unlock or to its hold ctx ending, whichever comes
// first; no two spans overlap, hand-offs happen throughout, and once the
// network heals nothing is left locked.
func TestHandoffsUnderNetworkFaultsKeepMutualExclusion(t *testing.T) {
	skipShortOutsideCI(t)
	for _, k := range []lockKind{kindByName("reentrant"), kindByName("fair")} {
		t.Run(k.name, func(t *testing.T) {
			// A server each; they run 2 s each (longer only on a
			// starved machine), and count hundreds of holds where 50 do.
			t.Parallel()
			testHandoffsUnderNetworkFaults(t, k)
		})
	}
}

func testHandoffsUnderNetworkFaults(t *testing.T, k lockKind) {
	s := redistest.Start(t)
	admin := s.Client(t)
	ctx := ctxT(t)
	p := faultproxy.Start(t, s.Addr())
	viaProxy := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { _ = viaProxy.Close() })
	opts := &runtime.Options{WatchdogTimeout: 900 * time.Millisecond, ReleaseTimeout: 300 * time.Millisecond}
	clients := []*runtime.Client{newClient(t, viaProxy, opts)}
	if k.name == "fair" {
		clients = append(clients, newClient(t, s.Client(t), opts))
	}

	// Count the hand-overs: a grant's message, or a release of the
	// proxied Client that published nothing while someone waited.
	var grants atomic.Int64
	mon := admin.PSubscribe(ctx, "redisson_lock__channel:*")
	defer mon.Close()
	if _, err := mon.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	go func() {
		for msg := range mon.Channel() {
			if strings.HasPrefix(msg.Payload, "2:") {
				grants.Add(1)
			}
		}
	}()
	publishes := commandCalls(t, admin, "publish")

	var (
		rec  intervals
		acqs atomic.Int64
	)
	// handedOver counts the hand-overs so far.
	handedOver := func() int64 {
		if k.name == "reentrant" {
			// Every release publishes unless it handed the lock on.
			return acqs.Load() - (commandCalls(t, admin, "publish") - publishes)
		}
		return grants.Load()
	}
	// 2 s, and on a starved machine (a full run beside other work, load
	// 8: 2 and 9 holds in 2 s) until it has made the holds and the
	// hand-overs it counts on (twice the 50 and 10 asserted), at most 20
	// s. Hand-overs need a waiter parked at the release, which a starved
	// box's goroutines often are not yet (GOMAXPROCS=1 beside three CPU
	// hogs: 103 holds, 9 hand-overs in the 2 s). The fault loop below
	// samples the count between faults.
	begin := time.Now()
	var enough atomic.Bool
	running := func() bool {
		since := time.Since(begin)
		return since < 2*time.Second || !enough.Load() && since < 20*time.Second
	}
	var wg sync.WaitGroup
	for g := range 8 {
		c := clients[g%len(clients)]
		m := k.new(c, "netfault-"+k.name, runtime.LockOptions{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for running() {
				hctx, err := m.TryLock(ctx, time.Second, runtime.Watchdog)
				if err != nil {
					continue // faults make waits fail; safety is what is checked
				}
				start := time.Now()
				var lost atomic.Int64 // when the hold's ctx ended, if before Unlock
				stopWatch := context.AfterFunc(hctx, func() { lost.Store(time.Now().UnixNano()) })
				time.Sleep(500 * time.Microsecond)
				end := time.Now()
				_ = m.Unlock(hctx)
				stopWatch()
				if l := lost.Load(); l != 0 && l < end.UnixNano() {
					end = time.Unix(0, l)
				}
				acqs.Add(1)
				rec.add(start, end)
			}
		}()
	}
	// The faults, in turn, on every connection of the proxied Client.
	faults := []func(){
		func() { p.Reset() },
		func() { p.Blackhole(faultproxy.Both); time.Sleep(150 * time.Millisecond); p.Heal() },
		func() { p.Latency(faultproxy.Both, 20*time.Millisecond); time.Sleep(200 * time.Millisecond); p.Heal() },
		func() { p.Blackhole(faultproxy.Downstream); time.Sleep(100 * time.Millisecond); p.Heal() },
	}
	for i := 0; running(); i++ {
		time.Sleep(150 * time.Millisecond)
		faults[i%len(faults)]()
		enough.Store(acqs.Load() >= 100 && handedOver() >= 20)
	}
	p.Heal()
	wg.Wait()

	if n := rec.overlaps(); n != 0 {
		t.Fatalf("%d overlapping holds in %d", n, acqs.Load())
	}
	handed := handedOver()
	t.Logf("%d holds, about %d handed over in the release", acqs.Load(), handed)
	if acqs.Load() < 50 || handed < 10 {
		t.Fatalf("%d holds, %d hand-overs: the test exercised too little", acqs.Load(), handed)
	}
	// The lock, its queue and its waiters' records go. A fair lock's
	// grants hash may keep the "granted" mark of a grantee whose release
	// was lost to a fault: it expires with the last grant's lease, or
	// with the queue timeout while others waited (fair_next.lua).
	left := func() (locked []string) {
		for _, k := range keysLeft(t, admin) {
			if !strings.HasPrefix(k, "lockgen_fair_grants:") {
				locked = append(locked, k)
			} else if admin.PTTL(ctx, k).Val() <= 0 {
				locked = append(locked, k+" (no expiry)")
			}
		}
		return locked
	}
	// 10 s, not 3: what is checked is that nothing is left, not how soon.
	// A reentrant waiter's record that outlives its waiter (say, a try
	// that reached Redis after the waiter's leave) goes with its keys,
	// 2 x grantRecordLife (4 s) after that try; a leave lost to a fault is
	// resent by the settler, whose rounds a starved box delays. Twice in 14
	// subtests on a starved box (GOMAXPROCS=1, three CPU hogs) the records
	// were still there at 3 s (not seen again in 72 subtests, so how they
	// came to be left is not established). A fair lock's queue keys have no
	// expiry: a record really left behind still fails here.
	deadline := time.Now().Add(10 * time.Second)
	for len(left()) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if l := left(); len(l) > 0 {
		t.Fatalf("left 10s after the network healed: %v", l)
	}
}
