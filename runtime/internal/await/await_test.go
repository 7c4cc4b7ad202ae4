package await_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime/internal/await"
	"github.com/lockgen/lockgen/runtime/internal/errs"
	"github.com/lockgen/lockgen/runtime/internal/hub"
	"github.com/lockgen/lockgen/runtime/internal/renew"
	"github.com/lockgen/lockgen/runtime/internal/scripts"
)

// The wait loop's decisions that need no server: single tries, the
// bounds of a call while Redis does not answer, and the refusals of a
// closed or draining Client. Waiting on a channel (the hub's part) is
// tested against servers by package runtime.

type loop struct {
	await.Loop
	closed, draining chan struct{}
	failed           atomic.Int32
	running          bool
}

func newLoop(t *testing.T) *loop {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // nothing listens: the hub stays idle
	h := hub.New(hub.Config{Client: rdb})
	t.Cleanup(func() { h.Close(); _ = rdb.Close() })
	l := &loop{closed: make(chan struct{}), draining: make(chan struct{})}
	l.Loop = await.Loop{
		Hub: h, SingleTry: 200 * time.Millisecond, Closed: l.closed, Draining: l.draining,
		Running:  func(context.Context) bool { return l.running },
		Failed:   func(error) { l.failed.Add(1) },
		Sleeping: func() {},
	}
	return l
}

var refused = &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}

func TestASingleTryReportsWhatRedisAnswered(t *testing.T) {
	l := newLoop(t)
	ctx := context.Background()
	taken := func(context.Context) (bool, time.Duration, error) { return true, 0, nil }
	held := func(context.Context) (bool, time.Duration, error) { return false, time.Second, nil }
	if err := l.Await(ctx, await.Spec{}, taken); err != nil {
		t.Fatalf("taken: %v", err)
	}
	if err := l.Await(ctx, await.Spec{}, held); !errors.Is(err, errs.NotAcquired) {
		t.Fatalf("held: %v, want NotAcquired", err)
	}
	var bounded bool
	probe := func(ctx context.Context) (bool, time.Duration, error) {
		b, ok := scripts.CallBoundOf(ctx)
		d, _ := ctx.Deadline()
		bounded = ok && b.Equal(d) && time.Until(b) <= l.SingleTry
		return true, 0, nil
	}
	if err := l.Await(ctx, await.Spec{}, probe); err != nil || !bounded {
		t.Fatalf("a single try runs under the SingleTry bound, carried by its ctx: %v, bounded %v", err, bounded)
	}
}

func TestAnUnreachableRedisIsRetriedUntilTheBoundThenUnavailable(t *testing.T) {
	l := newLoop(t)
	var tries int
	down := func(context.Context) (bool, time.Duration, error) { tries++; return false, 0, refused }
	start := time.Now()
	err := l.Await(context.Background(), await.Spec{Wait: 150 * time.Millisecond}, down)
	took := time.Since(start)
	if !errors.Is(err, errs.Unavailable) || !errors.Is(err, refused) {
		t.Fatalf("%v, want Unavailable wrapping the transport error", err)
	}
	if tries < 3 || int(l.failed.Load()) != tries {
		t.Fatalf("%d tries, %d failures told: want a few, each told", tries, l.failed.Load())
	}
	if took < 150*time.Millisecond {
		t.Fatalf("gave up after %v, before the wait of 150ms", took)
	}
}

// A try that ran out of time at the end of the wait, after Redis had
// answered that the lock was held, reports NotAcquired: as far as anyone
// knows the lock was held, and Redis was not down.
func TestATimeoutAfterAnAnswerIsNotAcquired(t *testing.T) {
	l := newLoop(t)
	var tries int
	try := func(ctx context.Context) (bool, time.Duration, error) {
		tries++
		if tries == 1 {
			return false, 5 * time.Millisecond, nil // held: Redis answered
		}
		<-ctx.Done() // a slow reply, cut at the call's bound
		return false, 0, ctx.Err()
	}
	err := l.Await(context.Background(), await.Spec{Channel: "ch", Wait: 50 * time.Millisecond}, try)
	if !errors.Is(err, errs.NotAcquired) || tries < 2 {
		t.Fatalf("%v after %d tries, want NotAcquired", err, tries)
	}
}

func TestAnUnsettledTryEndsTheWait(t *testing.T) {
	l := newLoop(t)
	var tries int
	lost := func(context.Context) (bool, time.Duration, error) {
		tries++
		return false, 0, errs.OutcomeUnknown
	}
	err := l.Await(context.Background(), await.Spec{Wait: time.Second, Unsettled: true}, lost)
	if !errors.Is(err, errs.Unavailable) || !errors.Is(err, errs.OutcomeUnknown) || tries != 1 {
		t.Fatalf("%v after %d tries, want one try and Unavailable wrapping OutcomeUnknown", err, tries)
	}
}

func TestClosedAndDrainingClientsRefuse(t *testing.T) {
	l := newLoop(t)
	called := false
	try := func(context.Context) (bool, time.Duration, error) { called = true; return true, 0, nil }
	close(l.draining)
	if err := l.Await(context.Background(), await.Spec{}, try); !errors.Is(err, errs.Draining) || called {
		t.Fatalf("draining, fresh acquisition: %v (tried %v)", err, called)
	}
	l.running = true
	if err := l.Await(context.Background(), await.Spec{}, try); err != nil || !called {
		t.Fatalf("draining, running work's acquisition: %v (tried %v)", err, called)
	}
	close(l.closed)
	called = false
	if err := l.Await(context.Background(), await.Spec{}, try); !errors.Is(err, errs.Closed) || called {
		t.Fatalf("closed: %v (tried %v)", err, called)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := newLoop(t).Await(ctx, await.Spec{}, try); !errors.Is(err, context.Canceled) || called {
		t.Fatalf("done ctx: %v (tried %v)", err, called)
	}
}

// A single try in a closed admission gate is held back briefly (20 ms,
// and no more than a quarter of the time it has: its SingleTry bound, or
// its ctx's deadline if sooner), and then tries: it never fails for the
// gate. The gate of another node holds it back not at all.
func TestASingleTryWaitsBrieflyInAClosedGate(t *testing.T) {
	l := newLoop(t)
	gate := renew.NewAdmission(renew.NewTiming(3 * time.Second))
	gate.Observe(time.Hour) // the renewals run an hour behind: closed
	l.Gate = func(key string) *renew.Admission {
		if key == "other" {
			return nil // a node with no lane
		}
		return gate
	}
	ctx := context.Background()
	var triedAt time.Time
	try := func(context.Context) (bool, time.Duration, error) { triedAt = time.Now(); return true, 0, nil }

	start := time.Now()
	if err := l.Await(ctx, await.Spec{Key: "other"}, try); err != nil {
		t.Fatal(err)
	}
	if d := triedAt.Sub(start); d >= 20*time.Millisecond {
		t.Fatalf("tried %v after the call began, held back by another node's gate", d)
	}

	start = time.Now()
	if err := l.Await(ctx, await.Spec{}, try); err != nil {
		t.Fatal(err)
	}
	if d := triedAt.Sub(start); d < 20*time.Millisecond {
		t.Fatalf("tried %v after the call began, want after 20ms in the gate", d)
	}

	short, cancel := context.WithTimeout(ctx, 40*time.Millisecond)
	defer cancel()
	start = time.Now()
	if err := l.Await(short, await.Spec{}, try); err != nil {
		t.Fatalf("a single try whose ctx ends sooner failed in the gate: %v", err)
	}
	if d := triedAt.Sub(start); d < 10*time.Millisecond {
		t.Fatalf("tried %v after the call began, want after a quarter of its ctx's 40ms", d)
	}
}

// A try that Redis answered "held" while the caller's ctx ended at the
// same moment (cancelled, or its deadline passed during the round trip)
// is a lock not acquired, as before: a plain ctx's cause is nothing more
// than its error, so nothing is added (withCause: "if that is more than
// ctx's error"), and the caller does not read a cancellation or timeout
// of its own ctx into a lock held by someone else. A cause set with
// WithCancelCause (a hold's loss) is still added.
func TestANotAcquiredWhileTheCtxEndsIsNotReportedAsTheCtxsError(t *testing.T) {
	l := newLoop(t)
	cctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dctx, dcancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer dcancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		end  func() // ends ctx while the try's reply is on its way
		not  error
	}{
		{"cancelled", cctx, cancel, context.Canceled},
		{"deadline", dctx, func() { <-dctx.Done() }, context.DeadlineExceeded},
	} {
		held := func(context.Context) (bool, time.Duration, error) { tc.end(); return false, time.Second, nil }
		err := l.Await(tc.ctx, await.Spec{}, held)
		if !errors.Is(err, errs.NotAcquired) {
			t.Fatalf("%s: Await = %v, want NotAcquired", tc.name, err)
		}
		if errors.Is(err, tc.not) {
			t.Errorf("%s: Await = %v: a lock held elsewhere is reported as the ctx's own %v", tc.name, err, tc.not)
		}
	}
	lost := errors.New("hold lost")
	ctx, lose := context.WithCancelCause(context.Background())
	held := func(context.Context) (bool, time.Duration, error) { lose(lost); return false, time.Second, nil }
	if err := l.Await(ctx, await.Spec{}, held); !errors.Is(err, errs.NotAcquired) || !errors.Is(err, lost) {
		t.Fatalf("Await = %v, want NotAcquired with the cause %v", err, lost)
	}
}

// tryAgain is the refusal of a slot half moved: a reply, before the
// script ran.
type tryAgain struct{}

func (tryAgain) Error() string { return "TRYAGAIN Multiple keys request during rehashing of slot" }
func (tryAgain) RedisError()   {}

// A waiter that gives up (its ctx cancelled) while its try meets Redis
// refusing it or not answering returns its ctx's error, not what the try
// met, which is moot once it gave up (a cluster test's waiter returned
// TRYAGAIN; one whose try's reply was lost returned ErrOutcomeUnknown).
func TestAWaiterThatGivesUpDuringAFailedTryReturnsItsCtxError(t *testing.T) {
	l := newLoop(t)
	for _, met := range []error{tryAgain{}, refused, errs.OutcomeUnknown} {
		ctx, cancel := context.WithCancel(context.Background())
		giveUp := func(context.Context) (bool, time.Duration, error) { cancel(); return false, 0, met }
		err := l.Await(ctx, await.Spec{Wait: 10 * time.Second}, giveUp)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("a try that met %v as its waiter gave up: %v, want context.Canceled", met, err)
		}
	}
}
