package runtime_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/faultproxy"
	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/runtime"
)

// A waiter whose pub/sub connection goes half-open (frozen both ways,
// nothing closed) or is reset must still be woken by an unlock published
// meanwhile: the hub pings an idle connection, replaces one that does not
// answer within a second, and wakes its waiters. The holder's 30 s lease
// must not be what ends the wait.
func TestWaiterWakesAfterItsPubSubConnectionDies(t *testing.T) {
	skipShortOutsideCI(t)
	// Servers of its own; its bound (5 s) is far from a loaded
	// machine's delays.
	t.Parallel()
	for _, fault := range []struct {
		name  string
		apply func(*faultproxy.Conn)
	}{
		{"frozen", func(c *faultproxy.Conn) { c.Blackhole(faultproxy.Both) }},
		{"reset", func(c *faultproxy.Conn) { c.Reset() }},
	} {
		t.Run(fault.name, func(t *testing.T) {
			forEachKind(t, exclusiveKinds, func(t *testing.T, k lockKind) {
				testWakeAfterPubSubFault(t, k, fault.apply)
			})
		})
	}
}

func testWakeAfterPubSubFault(t *testing.T, k lockKind, fault func(*faultproxy.Conn)) {
	s := redistest.Start(t)
	admin := s.Client(t)
	p := faultproxy.Start(t, s.Addr())
	viaProxy := redis.NewClient(&redis.Options{Addr: p.Addr()})
	t.Cleanup(func() { _ = viaProxy.Close() })
	waiterC := newClient(t, viaProxy, nil)
	holderC := newClient(t, admin, nil)
	ctx := ctxT(t)
	key := "frozen-" + k.name

	holder := k.new(holderC, key, runtime.LockOptions{})
	h, err := holder.TryLock(ctx, 0, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	acquired := make(chan time.Time, 1)
	go func() {
		m := k.new(waiterC, key, runtime.LockOptions{})
		w, err := m.TryLock(ctx, 40*time.Second, runtime.Watchdog)
		if err != nil {
			t.Error(err)
			return
		}
		acquired <- time.Now()
		_ = m.Unlock(w)
	}()
	eventually(t, 5*time.Second, "waiter subscribed", func() bool { return waitersOn(t, admin, key) == 1 })
	time.Sleep(50 * time.Millisecond)
	subs := p.ConnsMatching("subscribe")
	if len(subs) != 1 {
		t.Fatalf("%d pub/sub connections through the proxy, want 1", len(subs))
	}
	fault(subs[0])
	released := time.Now()
	if err := holder.Unlock(h); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-acquired:
		d := at.Sub(released)
		t.Logf("acquired %v after the release", d)
		if d > 5*time.Second {
			t.Fatalf("acquired %v after the release, want < 5s", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("waiter slept toward the holder's 30s lease: its dead pub/sub connection was never replaced")
	}
}
