package runtime_test

import (
	"context"
	"encoding"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/lua"
	"github.com/lockgen/lockgen/runtime"
)

// whenHook loses the first EVALSHA of a script made once cond holds: it
// is written (go-redis marshals it) to a connection that breaks before
// Redis reads it, so its outcome is unknown to the caller. It counts the
// script's calls.
type whenHook struct {
	sha   string
	cond  atomic.Pointer[func() bool]
	fired atomic.Bool
	// tries counts the script's calls done, inFlight those under way.
	tries, inFlight atomic.Int32
}

func (h *whenHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *whenHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *whenHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !isScriptCall(cmd.Args(), h.sha) {
			return next(ctx, cmd)
		}
		h.inFlight.Add(1)
		defer h.tries.Add(1)
		defer h.inFlight.Add(-1)
		if cond := h.cond.Load(); cond != nil && (*cond)() {
			h.cond.Store(nil)
			h.fired.Store(true)
			// Written to a connection that broke before Redis read it.
			if m, ok := cmd.Args()[1].(encoding.BinaryMarshaler); ok {
				_, _ = m.MarshalBinary()
			}
			cmd.SetErr(io.ErrUnexpectedEOF)
			return io.ErrUnexpectedEOF
		}
		return next(ctx, cmd)
	}
}

// A grant whose message is lost is found by the waiter's next try; when
// that try never reaches Redis and its reply is lost, settling it finds the
// grant and reports the lock taken. The hold counts its lease from that
// try, so the key must not expire before it: the grant's lease ran from
// the release (cut to the waiter's queue record), before the try was sent.
// Another owner must not take the lock while the grantee's ctx is live.
func TestFairGrantFoundBySettlingALostTryKeepsTheKeyPastTheHold(t *testing.T) {
	skipShortOutsideCI(t)
	// A server of its own; what it checks is an order (no other owner
	// while the hold is live), which no load may break.
	t.Parallel()
	s, rdb, a := setup(t, nil)
	plain := s.Client(t)
	ctx := ctxT(t)
	for _, sc := range []*redis.Script{lua.FairAcquire, lua.FairRelease, lua.FairLeave, lua.Settle} {
		sc.Load(ctx, plain)
	}
	h := &whenHook{sha: lua.FairAcquire.Hash()}
	gate := new(dialGate)
	wrdb := gatedClient(t, s.Addr(), gate)
	wrdb.AddHook(h)
	b := newClient(t, wrdb, nil)

	opts := runtime.LockOptions{QueueTimeout: 600 * time.Millisecond}
	const lease = 2 * time.Second
	holder := a.FairLock("fair", opts)
	held, err := holder.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	holderField := plain.HKeys(ctx, "fair").Val()[0]
	// Lose the waiter's first try made once the lock is granted to it.
	granted := func() bool {
		f := plain.HKeys(ctx, "fair").Val()
		return len(f) == 1 && f[0] != holderField
	}
	h.cond.Store(&granted)

	m := b.FairLock("fair", opts)
	got := queuedFairWaiter(t, rdb, func(ctx context.Context) (context.Context, error) {
		return m.TryLock(ctx, runtime.Forever, lease)
	})
	// Its try that joined the queue and the one its subscription's
	// confirmation woke are done: none is in flight as the release grants.
	eventually(t, 5*time.Second, "the waiter's two tries done", func() bool { return h.tries.Load() >= 2 && h.inFlight.Load() == 0 })
	// The grant's message reaches no one: the waiter's next try finds it.
	hctx := releaseWithGrantLost(t, plain, gate, holder, held, got)
	if !h.fired.Load() {
		t.Fatal("the grant was taken without the lost try this test is about")
	}
	// The hold ends at its deadline, a drift before what its try set in
	// Redis runs out. Judged by the deadline, not by whether the ctx is
	// done yet: the timer that ends it may run late on a loaded box (by
	// more than the drift, 25 ms at this lease: a CI run at load 5.7),
	// which says nothing of the key.
	deadline, ok := hctx.Deadline()
	if !ok {
		t.Fatal("a hold with a fixed lease has no deadline")
	}
	// An upper bound of the key's expiry (the clock read after the reply).
	if ttl := plain.PTTL(ctx, "fair").Val(); time.Now().Add(ttl).Before(deadline) {
		t.Fatalf("the key expires in %v, before the hold's deadline in %v", ttl, time.Until(deadline))
	}
	other := a.FairLock("fair", opts)
	for hctx.Err() == nil {
		if octx, err := other.TryLock(ctx, 0, lease); err == nil {
			took := time.Now() // no earlier than the other owner took it
			_ = other.Unlock(octx)
			if took.Before(deadline) {
				t.Fatalf("another owner took the lock %v before the grantee's hold's deadline: the key expired before it", deadline.Sub(took))
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = m.Unlock(hctx) // its fixed lease has run out: reported lost
	eventually(t, 3*time.Second, "no keys left", func() bool { return len(keysLeft(t, rdb)) == 0 })
}
