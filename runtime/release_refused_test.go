package runtime_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

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
