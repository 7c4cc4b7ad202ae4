package main

import (
	"strings"
	"testing"
	"time"

	"github.com/lockgen/lockgen/internal/faultproxy"
	"github.com/lockgen/lockgen/internal/redistest"
)

// TestZZTimeoutBoundsTheWholeView: -timeout 1s over a Redis that answers
// after 10s. The cluster-node probe (INFO) gets its own -timeout before
// the view gets another: the command gives up after 2 × -timeout.
func TestZZTimeoutBoundsTheWholeView(t *testing.T) {
	s := redistest.Start(t)
	p := faultproxy.Start(t, s.Addr())
	p.Latency(faultproxy.Both, 10*time.Second)
	start := time.Now()
	code, out, errs := runCLI(t, "inspect", "-config", "../../inspect/testdata/locks.yaml", "-redis", "redis://"+p.Addr(), "-timeout", "1s")
	d := time.Since(start)
	t.Logf("exit %d after %v, stdout %q, stderr %q", code, d, out, errs)
	if code != exitFail || !strings.Contains(errs, "-timeout 1s") || d > 1500*time.Millisecond {
		t.Errorf("inspect -timeout 1s: exit %d after %v; want exit 1 within ~1s (-timeout), naming -timeout", code, d)
	}
}
