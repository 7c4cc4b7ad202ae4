package runtime_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/internal/runtimetest"
	"github.com/lockgen/lockgen/runtime"
)

// Once Unlock begins, the hold's ctx is done before the release reaches
// Redis: the moment Redis runs it, another owner may take the lock, and
// work still running under the old hold's ctx (a goroutine the holder
// started with it) must have been told to stop by then. A slow release
// used to leave that ctx live until the reply came, with the hold already
// gone from the watchdog and the lease clock.
//
// A hook on the holder's clients looks at the ctx as each script call of
// the Unlock is sent: no clock is read. (The test paused Redis's writes
// and bounded the time from Unlock's start to the ctx's end at 200 ms,
// which a loaded box exceeded with the order right.)
func TestUnlockEndsTheHoldsCtxBeforeTheReleaseIsSent(t *testing.T) {
	for _, k := range runtimetest.Kinds {
		t.Run(k.Name, func(t *testing.T) {
			t.Parallel() // servers of its own, and no bound in time
			servers := redistest.StartN(t, 3)
			key := "unlock-order-" + k.Name
			hook := &sendOrderHook{key: key}
			var rdbs []redis.UniversalClient
			for _, s := range servers {
				rdb := s.Client(t)
				rdb.AddHook(hook)
				rdbs = append(rdbs, rdb)
			}
			c := newClient(t, rdbs[0], &runtime.Options{RedLockNodes: rdbs})
			ctx := ctxT(t)
			l := k.Holder(c, key)
			hctx, err := l.TryLock(ctx, 0, runtime.Watchdog)
			if err != nil {
				t.Fatal(err)
			}
			hook.arm(hctx)
			if err := l.Unlock(hctx); err != nil {
				t.Fatalf("Unlock: %v", err)
			}
			sent, live := hook.counts()
			if sent == 0 {
				t.Fatalf("no script call naming %s sent by Unlock: the hook sees nothing", key)
			}
			if live != 0 {
				t.Fatalf("%d of the %d script calls of Unlock sent with the hold's ctx still live", live, sent)
			}
			if hctx.Err() == nil {
				t.Fatal("the hold's ctx still live after Unlock")
			}
		})
	}
}

// sendOrderHook counts, once armed with a hold's ctx, the script calls
// naming key that are sent, and those sent while that ctx was live. The
// watchdog renews through a client of its own, which it does not hook.
type sendOrderHook struct {
	key        string
	mu         sync.Mutex
	hctx       context.Context
	sent, live int
}

func (h *sendOrderHook) arm(hctx context.Context) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hctx = hctx
}

func (h *sendOrderHook) counts() (sent, live int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sent, h.live
}

// seen is called just before cmd is sent.
func (h *sendOrderHook) seen(cmd redis.Cmder) {
	a := cmd.Args()
	if len(a) < 2 || (a[0] != "evalsha" && a[0] != "eval") {
		return
	}
	named := false
	for _, v := range a[2:] {
		if s, ok := v.(string); ok && strings.Contains(s, h.key) {
			named = true
			break
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.hctx == nil || !named {
		return
	}
	h.sent++
	if h.hctx.Err() == nil {
		h.live++
	}
}

func (h *sendOrderHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *sendOrderHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.seen(cmd)
		return next(ctx, cmd)
	}
}

func (h *sendOrderHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			h.seen(cmd)
		}
		return next(ctx, cmds)
	}
}
