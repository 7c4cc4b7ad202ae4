package runtime_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
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

// While the hub cannot subscribe a channel (its pub/sub connection was
// killed and every new connection hangs in the dial), waiters of other
// channels keep their wait times and their ctx: the subscribe runs on the
// connection's own goroutine, never under the hub's lock.
func TestSubscribeStallDoesNotStallOtherWaiters(t *testing.T) {
	s := redistest.Start(t)
	admin := s.Client(t)
	var hang atomic.Bool
	rdb := redis.NewClient(&redis.Options{
		Addr: s.Addr(),
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if hang.Load() { // a dial to a host that never answers
				t := time.NewTimer(5 * time.Second)
				defer t.Stop()
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-t.C:
					return nil, errors.New("dial timed out")
				}
			}
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	})
	t.Cleanup(func() { _ = rdb.Close() })
	c := newClient(t, rdb, nil)
	holderC := newClient(t, admin, nil)
	ctx := ctxT(t)
	for _, key := range []string{"stall-1", "stall-2"} {
		if _, err := holderC.Mutex(key, runtime.LockOptions{}).TryLock(ctx, 0, 30*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	k1 := c.Mutex("stall-1", runtime.LockOptions{})
	k2 := c.Mutex("stall-2", runtime.LockOptions{})
	bg, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _, _ = k1.TryLock(bg, 30*time.Second, runtime.Watchdog) }()
	eventually(t, 5*time.Second, "stall-1 subscribed", func() bool { return waitersOn(t, admin, "stall-1") == 1 })

	hang.Store(true)
	t.Cleanup(func() { hang.Store(false) })
	if err := admin.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = k2.TryLock(bg, 30*time.Second, runtime.Watchdog) }()
	time.Sleep(300 * time.Millisecond) // the subscribe of stall-2 is stuck in its dial

	start := time.Now()
	tried := make(chan error, 1)
	go func() {
		_, err := k1.TryLock(ctx, 100*time.Millisecond, runtime.Watchdog)
		tried <- err
	}()
	var err error
	select {
	case err = <-tried:
	case <-time.After(3 * time.Second):
		t.Fatal("TryLock(100ms) on a subscribed key still running after 3s while another channel's subscribe hangs")
	}
	d := time.Since(start)
	if !errors.Is(err, runtime.ErrNotAcquired) {
		t.Fatalf("TryLock on a busy, subscribed key: %v, want ErrNotAcquired", err)
	}
	t.Logf("TryLock(100ms) returned after %v", d)
	if d > 600*time.Millisecond {
		t.Fatalf("TryLock(100ms) took %v while another channel's subscribe hung", d)
	}

	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := k2.Lock(cctx)
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	cancelled := time.Now()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled waiter: %v", err)
		}
		t.Logf("cancelled waiter returned after %v", time.Since(cancelled))
	case <-time.After(500 * time.Millisecond):
		t.Fatal("a waiter whose channel cannot be subscribed ignored its ctx")
	}
}
