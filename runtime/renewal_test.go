package runtime_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/faultproxy"
	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/runtime"
)

// Every new connection pokes the watchdog, and a poked round renews every
// hold and reschedules it at later(sent, renewAt)+period: each poke pushes
// renewAt one more period into the future although only a fraction of a
// period passed. After a burst of reconnects (a pool growing under load) the
// next scheduled renewal lies past the hold's deadline, and a hold on a
// healthy server is declared lost.
func TestReconnectsNeverPushARenewalPastTheDeadline(t *testing.T) {
	s := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), PoolSize: 200})
	t.Cleanup(func() { _ = rdb.Close() })
	c := newClient(t, rdb, &runtime.Options{WatchdogTimeout: 300 * time.Millisecond})
	ctx := ctxT(t)
	m := c.Mutex("review:poke", runtime.LockOptions{})
	hctx, err := m.TryLock(ctx, 0, runtime.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = m.Unlock(hctx) }()

	// A pool growing: one new connection every 60 ms for 1.2 s (each dial
	// pokes the watchdog; pokes are at least 50 ms apart here).
	var conns []*redis.Conn
	for range 20 {
		cn := rdb.Conn()
		if err := cn.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, cn)
		time.Sleep(60 * time.Millisecond)
	}
	for _, cn := range conns {
		_ = cn.Close()
	}
	// The server is healthy throughout: the hold must survive.
	select {
	case <-hctx.Done():
		t.Fatalf("hold lost on a healthy server after a burst of reconnects: %v", context.Cause(hctx))
	case <-time.After(2 * time.Second):
	}
}

// Close waits for the renewal calls in flight, whose ctx ends only at the
// earliest deadline they serve, not at Close: during a blackhole Close
// blocks for up to 2/3 of WatchdogTimeout (20 s with the default).
func TestCloseDoesNotWaitOutARenewalInABlackhole(t *testing.T) {
	s := redistest.Start(t)
	p := faultproxy.Start(t, s.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	o := runtime.Options{WatchdogTimeout: 3 * time.Second, Logger: slog.New(slog.DiscardHandler)}
	c, err := runtime.NewClient(rdb, &o)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	m := c.Mutex("review:close", runtime.LockOptions{})
	if _, err := m.TryLock(ctx, 0, runtime.Watchdog); err != nil {
		t.Fatal(err)
	}
	p.Blackhole(faultproxy.Both)
	time.Sleep(1300 * time.Millisecond) // the first renewal (at 1 s) is on the wire
	start := time.Now()
	_ = c.Close()
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Fatalf("Close took %v: it waited for a renewal stuck in a blackhole", d)
	}
}
