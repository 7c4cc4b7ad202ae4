package runtime_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/faultproxy"
	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/runtime"
)

// Releases that Redis refused before they ran (BUSY here: another
// program's script runs past busy-reply-threshold), or whose reply was
// lost, found by an adversarial tester.

// startBusyServer starts a server that refuses commands with BUSY 50 ms
// into a slow script.
func startBusyServer(t *testing.T) *redistest.Server {
	return redistest.Start(t, redistest.Arg("--busy-reply-threshold", "50"))
}

// keepBusy has s run a script for about a second and returns once s
// refuses commands with BUSY; the channel is closed when the script ended.
func keepBusy(t *testing.T, s *redistest.Server) <-chan struct{} {
	t.Helper()
	done := make(chan struct{})
	rdb := s.Client(t)
	go func() {
		defer close(done)
		_ = rdb.Eval(context.Background(), busyFor1s, nil).Err()
	}()
	eventually(t, 5*time.Second, "Redis busy", func() bool {
		return redis.HasErrorPrefix(s.Client(t).Ping(context.Background()).Err(), "BUSY")
	})
	return done
}

// A plain semaphore's release refused with BUSY did not run, so it is
// sent again within ReleaseTimeout: plain permits have no lease, and a
// release given up on is a permit lost for good. Before, the release was
// sent once and returned the refusal ("0 permits free, want 1"). Adding
// permits and counting a latch down, sent once alike, are sent again too.
func TestAPlainSemaphoreReleaseRefusedByRedisIsSentAgain(t *testing.T) {
	t.Parallel() // a server of its own; bounds of seconds
	s := startBusyServer(t)
	ctx := ctxT(t)
	c := newClient(t, s.Client(t), &runtime.Options{ReleaseTimeout: 5 * time.Second})
	p := c.PlainSemaphore("plain", "plain")
	if ok, err := p.TrySetPermits(ctx, 1); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if err := p.TryAcquire(ctx, 1, 0); err != nil {
		t.Fatal(err)
	}
	l := c.Latch("latch", runtime.LatchOptions{Count: 2})
	if ok, err := l.Arm(ctx); !ok || err != nil {
		t.Fatal(ok, err)
	}
	done := keepBusy(t, s)
	errc := make(chan error, 3)
	go func() { errc <- p.Release(ctx, 1) }()
	go func() { errc <- p.AddPermits(ctx, 2) }()
	go func() { errc <- l.CountDown(ctx) }()
	for range 3 {
		if err := <-errc; err != nil {
			t.Errorf("a call sent while Redis refused it for about a second, within a ReleaseTimeout of 5 s: %v", err)
		}
	}
	<-done
	if n, err := p.Available(ctx); n != 3 || err != nil {
		t.Errorf("after the release of 1 permit and the addition of 2: %d free (%v), want 3", n, err)
	}
	if n, err := l.Count(ctx); n != 1 || err != nil {
		t.Errorf("after one count-down of 2: count %d (%v), want 1", n, err)
	}
}

// A release whose reply was lost is sent again; the resend finds nothing
// left to free, since the first copy freed it. That is an unknown outcome
// (the release may have been applied), not ErrLockLost ("fn ran without
// its lock"), which the release reported before.
func TestAReleaseResentAfterALostReplyIsAnUnknownOutcomeNotALoss(t *testing.T) {
	t.Parallel() // servers of their own; bounds of seconds
	for _, kind := range []string{"mutex", "semaphore"} {
		t.Run(kind, func(t *testing.T) {
			s := redistest.Start(t)
			px := faultproxy.Start(t, s.Addr())
			rdb := redis.NewClient(&redis.Options{Addr: px.Addr(), ReadTimeout: 300 * time.Millisecond})
			t.Cleanup(func() { _ = rdb.Close() })
			c := newClient(t, rdb, &runtime.Options{ReleaseTimeout: 5 * time.Second})
			admin, ctx := s.Client(t), ctxT(t)
			acquire, release, freed := lockAndRelease(t, c, admin, kind)
			// The first round loads the scripts, so the release below is one EVALSHA.
			if err := release(acquire()); err != nil {
				t.Fatal(err)
			}
			h := acquire()
			px.Blackhole(faultproxy.Downstream)
			done := make(chan error, 1)
			go func() { done <- release(h) }()
			eventually(t, 5*time.Second, "the release ran in Redis", freed)
			// Past the read timeout before healing, so that the proxy has
			// read (and dropped) the reply: healed at once, a loaded CI
			// run's proxy forwarded it, and the release got its reply.
			time.Sleep(400 * time.Millisecond)
			px.Heal()
			err := <-done
			t.Logf("release: %v", err)
			if errors.Is(err, runtime.ErrLockLost) || !errors.Is(err, runtime.ErrOutcomeUnknown) {
				t.Errorf("a release whose first copy freed the %s, reply lost: %v, want ErrOutcomeUnknown", kind, err)
			}
			if !freed() {
				t.Errorf("the %s is held again after its release: %v", kind, admin.Keys(ctx, "*").Val())
			}
		})
	}
}

// lockAndRelease returns, for a mutex, an atomic multi-lock of two or a
// semaphore of one permit on c, how to take it, release it, and whether
// Redis has it free.
func lockAndRelease(t *testing.T, c *runtime.Client, admin *redis.Client, kind string) (acquire func() context.Context, release func(context.Context) error, free func() bool) {
	ctx := ctxT(t)
	if kind == "multi" {
		ml := c.MultiLock(runtime.LockOptions{}, c.Mutex("{m}a", runtime.LockOptions{}), c.Mutex("{m}b", runtime.LockOptions{}))
		if !ml.Atomic() {
			t.Fatal("the multi-lock is not atomic")
		}
		acquire = func() context.Context {
			h, err := ml.TryLock(ctx, 0, runtime.Watchdog)
			if err != nil {
				t.Fatal(err)
			}
			return h
		}
		return acquire, ml.Unlock, func() bool { return admin.Exists(ctx, "{m}a", "{m}b").Val() == 0 }
	}
	if kind == "mutex" {
		m := c.Mutex("lock", runtime.LockOptions{})
		acquire = func() context.Context {
			h, err := m.TryLock(ctx, 0, runtime.Watchdog)
			if err != nil {
				t.Fatal(err)
			}
			return h
		}
		return acquire, m.Unlock, func() bool { return admin.Exists(ctx, "lock").Val() == 0 }
	}
	sem := c.Semaphore("sem", runtime.SemaphoreOptions{Permits: 1})
	acquire = func() context.Context {
		h, err := sem.TryAcquire(ctx, 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	return acquire, sem.Release, func() bool {
		return admin.ZCard(ctx, "{sem}:timeout").Val() == 0 && admin.Get(ctx, "sem").Val() == "1"
	}
}

// A release that Redis refused until its ReleaseTimeout ran out did not
// run: it is ErrUnavailable, not an unknown outcome, and the lock or
// permit is released in the background once Redis answers. Before, the
// error said "outcome unknown" and the hold stayed in Redis until its
// lease ran out (the watchdog's 30 s here), no longer renewed; an atomic
// multi-lock's members stayed so until a later fix. (READONLY,
// a master demoted with nothing to sync from, refuses at once; still, a
// slow machine may have the last attempt in flight at the timeout: then
// the outcome is unknown. calls' TestRetryReleaseTellsARefusedReleaseFromAnUnansweredOne
// checks the labels without timing.)
func TestAReleaseRefusedPastItsTimeoutIsUnavailableAndFinishedOnceRedisAnswers(t *testing.T) {
	t.Parallel() // a server of its own; bounds of seconds
	s := redistest.Start(t)
	admin, ctx := s.Client(t), ctxT(t)
	c := newClient(t, s.Client(t), &runtime.Options{ReleaseTimeout: 300 * time.Millisecond})
	kinds := []string{"mutex", "multi", "semaphore"}
	held := make([]context.Context, len(kinds))
	releases := make([]func(context.Context) error, len(kinds))
	frees := make([]func() bool, len(kinds))
	for i, kind := range kinds {
		var acquire func() context.Context
		acquire, releases[i], frees[i] = lockAndRelease(t, c, admin, kind)
		held[i] = acquire()
	}
	if err := admin.Do(ctx, "REPLICAOF", "127.0.0.1", "1").Err(); err != nil {
		t.Fatal(err)
	}
	for i, kind := range kinds {
		err := releases[i](held[i])
		t.Logf("%s: %v", kind, err)
		if err == nil || errors.Is(err, runtime.ErrLockLost) || !errors.Is(err, runtime.ErrUnavailable) && !errors.Is(err, runtime.ErrOutcomeUnknown) {
			t.Errorf("%s: a release refused until its timeout: %v, want ErrUnavailable", kind, err)
		}
	}
	for i, kind := range kinds {
		if frees[i]() {
			t.Fatalf("the %s is free while Redis refused every write", kind)
		}
	}
	if err := admin.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	for i, kind := range kinds {
		eventually(t, 5*time.Second, kind+" released once Redis answers", frees[i])
	}
}

// A hand-off to a waiter of the releasing Client that Redis refused
// (READONLY) until ReleaseTimeout did not run: the waiter keeps waiting
// and gets the lock once Redis answers and the release is finished in the
// background. It used to be told the offer's outcome was unknown, failed
// to settle it while Redis still refused, and gave up its wait with
// ErrOutcomeUnknown, 14 s of it left.
func TestAWaiterOfARefusedHandOffKeepsWaiting(t *testing.T) {
	t.Parallel() // a server of its own; bounds of seconds
	s := redistest.Start(t)
	admin, ctx := s.Client(t), ctxT(t)
	c := newClient(t, s.Client(t), &runtime.Options{ReleaseTimeout: 300 * time.Millisecond})
	m := c.Mutex("handed", runtime.LockOptions{})
	h, err := m.TryLock(ctx, 0, runtime.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	got := waitThenUnlock(func() (context.Context, error) { return m.TryLock(ctx, 15*time.Second, runtime.Watchdog) }, m.Unlock)
	eventually(t, 5*time.Second, "the waiter parked", func() bool { return parkedOf(m) == 1 })
	if err := admin.Do(ctx, "REPLICAOF", "127.0.0.1", "1").Err(); err != nil {
		t.Fatal(err)
	}
	if err := m.Unlock(h); !errors.Is(err, runtime.ErrUnavailable) && !errors.Is(err, runtime.ErrOutcomeUnknown) {
		t.Errorf("a hand-off refused until its timeout: %v, want ErrUnavailable", err)
	}
	stillWaits(t, got, 300*time.Millisecond, "Redis refused writes")
	if err := admin.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	takesTheLock(t, got, 10*time.Second, "Redis answered")
}
