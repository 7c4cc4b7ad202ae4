package runtime_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/runtime"
)

// noTrackClient is a go-redis client the server refuses CLIENT commands
// (an ACL), so the hub's key tracking is off: a lock freed without a
// message is seen only by a waiter's TTL.
func noTrackClient(t *testing.T, s *redistest.Server, admin *redis.Client) *redis.Client {
	t.Helper()
	ctx := ctxT(t)
	if err := admin.Do(ctx, "ACL", "SETUSER", "notrack", "on", ">pw", "+@all", "-client", "~*", "&*").Err(); err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), Username: "notrack", Password: "pw"})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// A goroutine that came behind its Client's own waiter skipped its try, so
// it knows no holder's TTL: it counts on the waiter ahead, which sleeps on
// the TTL its try read. When that waiter gives up before the holder's lease
// runs out (a crashed holder: no message comes) and key tracking is off,
// the one behind must still be told to try (it then sleeps on the TTL),
// or it sleeps its whole first sleep, 5 s from its start, on a free lock.
func TestSkippedTryWaiterTriesWhenTheWaiterAheadGivesUp(t *testing.T) {
	s := redistest.Start(t)
	admin := s.Client(t)
	ctx := ctxT(t)
	c := newClient(t, noTrackClient(t, s, admin), nil)
	crashed := newClient(t, s.Client(t), nil)
	const key = "skip:ahead-leaves"
	// The holder takes the lock for 600 ms and never releases it.
	if _, err := crashed.Mutex(key, runtime.LockOptions{}).TryLock(ctx, 0, 600*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	free := time.Now().Add(600 * time.Millisecond) // the lease has run out by then
	m := c.Mutex(key, runtime.LockOptions{})
	aheadCtx, giveUp := context.WithCancel(ctx)
	aheadDone := make(chan error, 1)
	go func() {
		_, err := m.TryLock(aheadCtx, runtime.Forever, runtime.Watchdog)
		aheadDone <- err
	}()
	eventually(t, 5*time.Second, "waiter ahead parked", func() bool { return parkedOf(m) == 1 })
	type result struct {
		hctx context.Context
		err  error
		at   time.Time
	}
	got := make(chan result, 1)
	go func() {
		hctx, err := m.TryLock(ctx, 20*time.Second, runtime.Watchdog)
		got <- result{hctx, err, time.Now()}
	}()
	eventually(t, 5*time.Second, "newcomer parked behind it", func() bool { return parkedOf(m) == 2 })
	giveUp()
	if err := <-aheadDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("waiter ahead: %v, want context.Canceled", err)
	}
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	d := r.at.Sub(free).Round(time.Millisecond)
	t.Logf("newcomer acquired %v after the lease ran out", d)
	// It tried when the waiter ahead left, 600 ms before the lease ran
	// out, and slept on the TTL it read; sleeping out its skipped try's
	// 5 s instead ends 4.4 s after.
	if d > 2*time.Second {
		t.Fatalf("newcomer acquired %v after the lease ran out: it slept on a free lock (the waiter ahead gave up, no message came, tracking is off)", d)
	}
	if err := m.Unlock(r.hctx); err != nil {
		t.Fatal(err)
	}
}
