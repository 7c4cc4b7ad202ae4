package runtime_test

import (
	"context"
	"encoding"
	"io"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/lua"
	"github.com/lockgen/lockgen/runtime"
)

// A semaphore waiter whose try lost its reply, settled as not taken, goes
// on waiting with a new request: the settled request's marker refuses
// every copy of it, so trying it again would end the wait with
// ErrNotAcquired however long the wait time (a failover on Redis Cluster
// loses replies this way).
func TestSemaphoreWaiterGoesOnAfterATrySettledAsAborted(t *testing.T) {
	h := &faultHook{sha: lua.SemaphoreAcquire.Hash()}
	h.fn = func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		// Lost on its way: go-redis wrote it (it marshalled the SHA), Redis
		// never ran it, and the settlement marks it aborted.
		if m, ok := cmd.Args()[1].(encoding.BinaryMarshaler); ok {
			_, _ = m.MarshalBinary()
		}
		cmd.SetErr(io.ErrUnexpectedEOF)
		return io.ErrUnexpectedEOF
	}
	_, c, _ := hooked(t, h)
	ctx := ctxT(t)
	s := c.Semaphore("seats", runtime.SemaphoreOptions{Permits: 1})
	h.armed.Store(true)
	hctx, err := s.TryAcquire(ctx, 1, 2*time.Second)
	if err != nil {
		t.Fatalf("a waiter whose first try was settled as aborted: %v", err)
	}
	if h.armed.Load() {
		t.Fatal("no reply was lost")
	}
	if err := s.Release(hctx); err != nil {
		t.Fatal(err)
	}
}
