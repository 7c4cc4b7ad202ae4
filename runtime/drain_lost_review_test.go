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

// Drain takes every free permit and returns how many it took: a change of
// the count that is not idempotent. A copy go-redis resends after the
// reply was lost finds no free permit and reports 0, so the caller, told
// it took none, never gives back the permits the first copy took: they
// are gone from the semaphore. Sent once, like AddPermits, its lost reply
// is an unknown outcome; or it reports what it took.
func TestSemaphoreDrainWhoseReplyIsLostDoesNotReportNoneTaken(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	p := faultproxy.Start(t, s.Addr())
	pc := redis.NewClient(&redis.Options{Addr: p.Addr(), ReadTimeout: 300 * time.Millisecond})
	t.Cleanup(func() { _ = pc.Close() })
	c := newClient(t, pc, nil)
	direct := s.Client(t)
	ctx := context.Background()
	sem := c.Semaphore("drained", runtime.SemaphoreOptions{})
	if err := sem.SetPermits(ctx, 5); err != nil { // a connection open, the scripts cached
		t.Fatal(err)
	}
	if _, err := sem.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sem.SetPermits(ctx, 5); err != nil {
		t.Fatal(err)
	}
	p.Blackhole(faultproxy.Downstream)
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() { n, err := sem.Drain(ctx); done <- result{n, err} }()
	eventually(t, 2*time.Second, "the drain ran", func() bool { return direct.Get(ctx, "drained").Val() == "0" })
	time.Sleep(50 * time.Millisecond) // its reply reaches the proxy and is dropped before Heal
	p.Heal()
	r := <-done
	if r.err == nil && r.n != 5 {
		t.Fatalf("Drain = %d, nil after it took the 5 free permits (its reply lost): they are lost to the semaphore", r.n)
	}
	if r.err != nil && !errors.Is(r.err, runtime.ErrOutcomeUnknown) {
		t.Fatalf("Drain = %v, want ErrOutcomeUnknown (its reply was lost)", r.err)
	}
}

// The same for a latch's Delete, which reports whether it deleted the
// latch: a copy resent after the lost reply finds it gone and reports
// false, so the caller is told the latch was not there when its own call
// deleted it.
func TestLatchDeleteWhoseReplyIsLostDoesNotReportNothingDeleted(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	p := faultproxy.Start(t, s.Addr())
	pc := redis.NewClient(&redis.Options{Addr: p.Addr(), ReadTimeout: 300 * time.Millisecond})
	t.Cleanup(func() { _ = pc.Close() })
	c := newClient(t, pc, nil)
	direct := s.Client(t)
	ctx := context.Background()
	l := c.Latch("deleted", runtime.LatchOptions{Count: 3})
	if _, err := l.Arm(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Delete(ctx); err != nil { // the scripts cached
		t.Fatal(err)
	}
	if ok, err := l.Arm(ctx); !ok || err != nil {
		t.Fatal(ok, err)
	}
	p.Blackhole(faultproxy.Downstream)
	type result struct {
		ok  bool
		err error
	}
	done := make(chan result, 1)
	go func() { ok, err := l.Delete(ctx); done <- result{ok, err} }()
	eventually(t, 2*time.Second, "the delete ran", func() bool { return direct.Exists(ctx, "deleted").Val() == 0 })
	time.Sleep(50 * time.Millisecond) // its reply reaches the proxy and is dropped before Heal
	p.Heal()
	r := <-done
	if r.err == nil && !r.ok {
		t.Fatalf("Delete = false, nil after it deleted the armed latch (its reply lost)")
	}
	if r.err != nil && !errors.Is(r.err, runtime.ErrOutcomeUnknown) {
		t.Fatalf("Delete = %v, want ErrOutcomeUnknown (its reply was lost)", r.err)
	}
}
