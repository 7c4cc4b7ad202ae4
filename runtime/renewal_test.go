package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/faultproxy"
	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/lua"
	"github.com/lockgen/lockgen/runtime"
)

// Every new connection pokes the watchdog, and a poked round renews every
// hold and reschedules it at later(sent, renewAt)+period: each poke pushes
// renewAt one more period into the future although only a fraction of a
// period passed. After a burst of reconnects (a pool growing under load) the
// next scheduled renewal lies past the hold's deadline, and a hold on a
// healthy server is declared lost.
//
// The test waits for the renewals after the burst, not for a fixed time
// with the hold alive: a regular renewal must come (within about a period)
// before the hold's deadline ends it. With a 300 ms lease, a process
// stalled 200 ms under load lost the hold with no schedule at fault.
func TestReconnectsNeverPushARenewalPastTheDeadline(t *testing.T) {
	skipShortOutsideCI(t)
	s := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), PoolSize: 200})
	t.Cleanup(func() { _ = rdb.Close() })
	// A 667 ms period, pokes at least 167 ms apart: the burst below makes
	// about 7 poked rounds, which pushed renewAt about 7 periods on, past
	// the deadline (a lease, 3 periods, after the last poke).
	const wd = 2 * time.Second
	renewed := make(chan struct{}, 64)
	c := newClient(t, rdb, &runtime.Options{WatchdogTimeout: wd,
		Observer: runtime.ObserverFunc(func(e runtime.Event) {
			if e.Kind == runtime.EventRenewed && e.Renewed > 0 {
				select {
				case renewed <- struct{}{}:
				default:
				}
			}
		})})
	ctx := ctxT(t)
	m := c.Mutex("review:poke", runtime.LockOptions{})
	hctx, err := m.TryLock(ctx, 0, runtime.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = m.Unlock(hctx) }()

	// A pool growing: one new connection every 60 ms for 1.2 s (each dial
	// pokes the watchdog).
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
	// The server is healthy throughout: the hold must be renewed on. The
	// first renewal from now may be the poke of the last dial; the second
	// is a scheduled one, due at most 1.25 periods after the one before.
	for len(renewed) > 0 {
		<-renewed
	}
	for i := range 2 {
		select {
		case <-renewed:
		case <-hctx.Done():
			t.Fatalf("hold lost on a healthy server after a burst of reconnects (%d renewals since): %v", i, context.Cause(hctx))
		case <-time.After(2 * wd):
			t.Fatalf("no renewal within %v, the hold alive", 2*wd)
		}
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

// A lock key overwritten with a value of another type is a hold gone: that
// hold is lost at its next renewal, and the holds renewed in the same call
// stay. The renewal script used to fail the whole call with WRONGTYPE,
// every round, until every hold sent with that key was lost.
func TestAKeyOfAnotherTypeLosesOnlyItsOwnHold(t *testing.T) {
	skipShortOutsideCI(t)
	const wd = 1500 * time.Millisecond
	e := newEnv(t, &runtime.Options{WatchdogTimeout: wd})
	ctx := ctxT(t)
	holds := make([]context.Context, 20)
	for i := range holds {
		h, err := e.c.Mutex(fmt.Sprintf("typed:%d", i), runtime.LockOptions{}).TryLock(ctx, 0, runtime.Watchdog)
		if err != nil {
			t.Fatal(err)
		}
		holds[i] = h
	}
	e.rdb.Set(ctx, "typed:0", "not a lock", 0) // replaces the hash
	select {
	case <-holds[0].Done():
		if !errors.Is(context.Cause(holds[0]), runtime.ErrLockLost) {
			t.Fatalf("the overwritten hold ended with %v, want ErrLockLost", context.Cause(holds[0]))
		}
	case <-time.After(3 * wd):
		t.Fatal("the hold whose key was overwritten was never found lost")
	}
	// Its batch renewed the others: each key's TTL was pushed back up to
	// about a lease after it had run down by a period.
	for i, h := range holds[1:] {
		if h.Err() != nil {
			t.Fatalf("hold %d lost with the overwritten one: %v", i+1, context.Cause(h))
		}
	}
	time.Sleep(wd / 3)
	for i, h := range holds[1:] {
		if h.Err() != nil {
			t.Fatalf("hold %d lost after the overwritten one: %v", i+1, context.Cause(h))
		}
	}
}

// The first hold loads the renewal script through the renewal client at
// once, a period before the first renewal: that renewal finds a connection
// dialled and the script loaded instead of paying a dial, NOSCRIPT and
// SCRIPT LOAD before its call (six round trips on a cold start, more than
// a short lease's renewal window on a slow link).
func TestTheFirstHoldWarmsTheRenewalPath(t *testing.T) {
	e := newEnv(t, nil)
	ctx := ctxT(t)
	if err := e.rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	m := e.c.Mutex("warm", runtime.LockOptions{})
	h, err := m.TryLock(ctx, 0, runtime.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Unlock(h)
	eventually(t, 5*time.Second, "the renewal script loaded", func() bool {
		ok, err := e.rdb.ScriptExists(ctx, lua.RenewBatch.Hash()).Result()
		return err == nil && ok[0]
	})
}
