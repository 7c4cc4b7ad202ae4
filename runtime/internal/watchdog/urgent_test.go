package watchdog

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/faultproxy"
	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/runtime/internal/holds"
)

// A renewal call ends at its earliest hold's deadline. A hold whose
// renewals failed until it has 250 ms left, renewed over a 10 ms round
// trip, is kept although every round also has holds with at most 8 ms
// left (ones whose renewals failed until their last moment, as in any
// outage; one comes every 4 ms): it does not share their calls, which end
// before a reply can come. Sent with them (all holds with less than a
// period left shared calls), it was lost in 5 runs of 6.
func TestAnUrgentHoldIsNotCutShortByHoldsAboutToExpire(t *testing.T) {
	const rtt = 10 * time.Millisecond
	srv := redistest.Start(t)
	direct := srv.Client(t)
	p := faultproxy.Start(t, srv.Addr())
	p.Latency(faultproxy.Downstream, rtt)
	via := redis.NewClient(&redis.Options{Addr: p.Addr()})
	t.Cleanup(func() { _ = via.Close() })
	f := newFixtureOn(t, via)
	n := 0
	// hold records a watchdog hold with left until its deadline, as if
	// its last confirmed renewal was sent lease − drift − left ago.
	hold := func(left time.Duration) context.Context {
		n++
		key := fmt.Sprintf("{urgent%d}", n)
		ctx := context.Background()
		direct.HSet(ctx, key, "o", 1)
		direct.PExpire(ctx, key, time.Hour) // a renewal that reaches Redis confirms
		drift := lease/100 + 5*time.Millisecond
		sent := time.Now().Add(-(lease - drift - left))
		return f.reg.Add(ctx, holds.Spec{Name: key, Key: key, Kind: "reentrant", From: taker{}}, holds.NewArgs(key, "o", "o"), 0, sent)
	}
	hold(8 * time.Millisecond)
	kept := hold(250 * time.Millisecond)
	stop := time.After(700 * time.Millisecond) // past kept's deadline had it not been renewed
	for tick := time.NewTicker(4 * time.Millisecond); ; {
		select {
		case <-tick.C:
			hold(8 * time.Millisecond)
			continue
		case <-stop:
			tick.Stop()
		}
		break
	}
	if kept.Err() != nil {
		t.Fatalf("a hold with 250 ms left, renewed over a %v round trip, was lost: %v", rtt, context.Cause(kept))
	}
}
