package calls

import (
	"context"
	"testing"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/renew"
)

func TestReleasesYieldToRenewalsOnlyWhileTheGateIsClosed(t *testing.T) {
	gate := renew.NewAdmission(renew.NewTiming(3 * time.Second))
	k := Limits{Gate: gate}
	ctx := context.Background()

	start := time.Now()
	k.Yield(ctx)
	if d := time.Since(start); d >= yieldFor {
		t.Fatalf("an open gate held a release back for %v", d)
	}

	gate.Observe(time.Hour) // the renewals run an hour behind
	start = time.Now()
	k.Yield(ctx)
	if d := time.Since(start); d < yieldFor {
		t.Fatalf("a closed gate held a release back for %v, less than %v", d, yieldFor)
	}

	var none Limits // a Client without a watchdog gate
	none.Yield(ctx)
}
