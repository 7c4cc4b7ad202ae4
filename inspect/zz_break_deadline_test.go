package inspect_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/inspect"
	"github.com/lockgen/lockgen/internal/faultproxy"
	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/runtime"
)

// TestZZDeadlineDuringLabelsIsNoSuccess: a view whose deadline (the CLI's
// -timeout) passes while owner labels are read must fail, not return
// holders of a labelled lockgen client as "no label" (Redisson).
func TestZZDeadlineDuringLabelsIsNoSuccess(t *testing.T) {
	s := redistest.Start(t)
	rdb := s.Client(t)
	ctx := context.Background()
	c := lockClient(t, rdb, runtime.Options{Name: "worker"})
	for i := range 5 {
		hold(t, ctx, c.Mutex("order:"+strconv.Itoa(i), runtime.LockOptions{Name: "OrderLock"}))
	}
	labelled(t, rdb, c)
	p := faultproxy.Start(t, s.Addr())
	p.Latency(faultproxy.Both, 50*time.Millisecond)
	slow := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = slow.Close() })
	in := &inspect.Inspector{Spec: spec(t), Redis: slow}
	bad := 0
	for d := 150 * time.Millisecond; d <= 900*time.Millisecond; d += 25 * time.Millisecond {
		vctx, cancel := context.WithTimeout(ctx, d)
		list, _, err := in.Instances(vctx, "OrderLock")
		cancel()
		if err != nil {
			continue
		}
		for _, st := range list {
			for _, h := range st.Holders {
				if h.Who.NoLabel {
					bad++
					t.Errorf("deadline %v: Instances succeeded, %s holder %s shown with no label (Redisson %v); its client is labelled", d, st.Key, h.Owner, h.Who.Redisson)
					break
				}
			}
		}
	}
	_ = bad
}
