package calls

import (
	"context"
	"errors"
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
