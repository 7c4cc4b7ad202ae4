package calls

import (
	"context"
	"testing"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/renew"
)

func TestReleasesYieldToRenewalsOnlyWhileTheGateIsClosed(t *testing.T) {
	gate := renew.NewAdmission(renew.NewTiming(3 * time.Second))
	// Key a's node has the gate; the others none (a node with no lane).
	gateOf := func(key string) *renew.Admission {
		if key == "a" {
			return gate
		}
		return nil
	}
	k := Limits{Gate: gateOf, Timeout: time.Second}
	ctx := context.Background()

	start := time.Now()
	if got := k.Yield(ctx, "a"); got != ctx {
		t.Fatal("an open gate changed the release's ctx")
	}
	if d := time.Since(start); d >= yieldFor {
		t.Fatalf("an open gate held a release back for %v", d)
	}

	gate.Observe(time.Hour) // the renewals to a's node run an hour behind
	if got := k.Yield(ctx, "b"); got != ctx {
		t.Fatal("a closed gate of another node changed the release's ctx")
	}
	start = time.Now()
	yielded := k.Yield(ctx, "a")
	if d := time.Since(start); d < yieldFor {
		t.Fatalf("a closed gate held a release back for %v, less than %v", d, yieldFor)
	}
	// The wait counts in the release's timeout: its limit is unchanged.
	if limit := k.Limit(yielded); limit.After(start.Add(k.Timeout + yieldFor/2)) {
		t.Fatalf("after the wait the release may run until %v after it started, past its timeout %v", limit.Sub(start), k.Timeout)
	}

	var none Limits // a Client without a watchdog gate
	if none.Yield(ctx, "a") != ctx {
		t.Fatal("no gate changed the release's ctx")
	}
}
