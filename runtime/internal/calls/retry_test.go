package calls

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime/internal/errs"
	"github.com/lockgen/lockgen/runtime/internal/scripts"
)

type replyErr string

func (e replyErr) Error() string { return string(e) }
func (replyErr) RedisError()     {}

// An attempt that went unanswered (it may have run) and then refusals or
// attempts never sent until the limit come back as outcome unknown
// wrapping the unanswered attempt's error, not a reply: a caller reading
// scripts.IsReply as "Redis answered, the script never wrote" (the
// hand-off's fallback) must not take it for one. A review found the
// refusal reported instead.
func TestRetryAfterAnUnansweredAttemptIsNoReply(t *testing.T) {
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 50 * time.Millisecond, ContextTimeoutEnabled: true})
	defer dead.Close()
	notSent := func(ctx context.Context) error {
		return scripts.Settle.Run(ctx, dead, 2, []any{3: "k", "m", "f", 0, 1000}).Err()
	}
	if err := notSent(context.Background()); !scripts.NotSent(err) {
		t.Fatalf("setup: %v is not NotSent", err)
	}
	timeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded} // sent, no reply
	for _, tc := range []struct {
		name  string
		steps []string // "timeout", "readonly", "notsent"; the last repeats
	}{
		{"unanswered, refused, never sent", []string{"timeout", "readonly", "notsent"}},
		{"unanswered, then refused", []string{"timeout", "readonly"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := Limits{Timeout: 200 * time.Millisecond}
			n := 0
			_, err := k.Retry(context.Background(), func(ctx context.Context) (int64, error) {
				s := tc.steps[min(n, len(tc.steps)-1)]
				n++
				switch s {
				case "timeout":
					return 0, timeout
				case "readonly":
					return 0, replyErr("READONLY You can't write against a read only replica.")
				}
				return 0, notSent(ctx)
			})
			t.Logf("%d attempts: %v", n, err)
			if !errors.Is(err, errs.OutcomeUnknown) {
				t.Fatalf("%v, want outcome unknown", err)
			}
			if scripts.IsReply(err) {
				t.Errorf("an outcome unknown reads as a reply (handoff.go takes it as 'the script failed before it wrote'): %v", err)
			}
		})
	}
}

// An op that must not run twice is sent again after a refusal (it did not
// run), never after a lost reply (it may have run); refused until its
// limit, it did not run: errs.Unavailable, not an unknown outcome. A
// plain semaphore's release refused with BUSY was sent once, and its
// permit lost for good.
func TestResendRefusedSendsAgainOnlyWhatDidNotRun(t *testing.T) {
	busy := replyErr("BUSY Redis is busy running a script.")
	lost := fmt.Errorf("%w: %w", errs.OutcomeUnknown, &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded})
	k := Limits{Timeout: 200 * time.Millisecond}
	for _, tc := range []struct {
		name     string
		steps    []error // the last repeats
		attempts int     // 0: more than one
		want     error
	}{
		{"refused, then run", []error{busy, busy, nil}, 3, nil},
		{"refused, then lost", []error{busy, lost}, 2, errs.OutcomeUnknown},
		{"refused until the limit", []error{busy}, 0, errs.Unavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := 0
			err := k.ResendRefused(context.Background(), func(context.Context) error {
				n++
				return tc.steps[min(n, len(tc.steps))-1]
			})
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("%v, want %v", err, tc.want)
			}
			if errors.Is(err, errs.Unavailable) && errors.Is(err, errs.OutcomeUnknown) {
				t.Errorf("%v is both unavailable and an unknown outcome", err)
			}
			if tc.attempts != 0 && n != tc.attempts || tc.attempts == 0 && n < 2 {
				t.Errorf("%d attempts, want %d", n, tc.attempts)
			}
		})
	}
}

// A release refused until its limit did not run: errs.Unavailable, which
// its caller may send again later, not an unknown outcome (as Retry, for
// what a settlement settles, still says). One whose attempt went
// unanswered, or was cut short in flight by the limit, may have run: an
// unknown outcome, and unanswered tells the caller a resend that found
// nothing may have followed the copy that freed it. Before, a release
// refused by a busy Redis until its ReleaseTimeout said "outcome unknown".
func TestRetryReleaseTellsARefusedReleaseFromAnUnansweredOne(t *testing.T) {
	busy := replyErr("BUSY Redis is busy running a script.")
	timeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded} // sent, no reply
	k := Limits{Timeout: 200 * time.Millisecond}
	for _, tc := range []struct {
		name       string
		op         func(n int, ctx context.Context) error // n: the attempt, from 1
		want       error
		unanswered bool
	}{
		{"refused to the end", func(int, context.Context) error { return busy }, errs.Unavailable, false},
		{"unanswered, then refused", func(n int, _ context.Context) error {
			if n == 1 {
				return timeout
			}
			return busy
		}, errs.OutcomeUnknown, true},
		{"refused, then cut in flight", func(n int, ctx context.Context) error {
			if n < 3 {
				return busy
			}
			<-ctx.Done()
			return fmt.Errorf("no reply by the end of the call: %w", ctx.Err())
		}, errs.OutcomeUnknown, true},
		{"unanswered, then found nothing", func(n int, _ context.Context) error {
			if n == 1 {
				return timeout
			}
			return redis.Nil
		}, redis.Nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := 0
			_, unanswered, err := k.RetryRelease(context.Background(), func(ctx context.Context) (int64, error) {
				n++
				return 0, tc.op(n, ctx)
			})
			if !errors.Is(err, tc.want) || unanswered != tc.unanswered {
				t.Errorf("%v (unanswered %v), want %v (unanswered %v)", err, unanswered, tc.want, tc.unanswered)
			}
			if errors.Is(err, errs.Unavailable) && errors.Is(err, errs.OutcomeUnknown) {
				t.Errorf("%v is both unavailable and an unknown outcome", err)
			}
			if errors.Is(err, redis.Nil) == Unfinished(err) {
				t.Errorf("Unfinished(%v) = %v", err, Unfinished(err))
			}
		})
	}
}
