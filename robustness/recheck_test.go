package robustness

import (
	"os"
	"testing"
	"time"
)

// TestRecheck runs the checkers again on the history of an earlier run,
// as a failure writes it (history.json): after a checker is fixed, the
// histories that made it fail show whether the fix explains them.
//
//	LOCKGEN_ROBUSTNESS_RECHECK=/tmp/lockgen-robustness-seed-N-.../history.json \
//	  go test ./robustness -run TestRecheck -v
//
// LOCKGEN_ROBUSTNESS_WD sets the run's watchdog lease if it was not the
// default. The hygiene check looks at the live server, so it is not rerun.
// Without the variable the test is skipped.
func TestRecheck(t *testing.T) {
	path := os.Getenv("LOCKGEN_ROBUSTNESS_RECHECK")
	if path == "" {
		t.Skip("LOCKGEN_ROBUSTNESS_RECHECK names no history")
	}
	var cfg Config
	cfg.defaults()
	if v := os.Getenv("LOCKGEN_ROBUSTNESS_WD"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("LOCKGEN_ROBUSTNESS_WD: %v", err)
		}
		cfg.Watchdog = d
	}
	h, err := ReadHistory(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range CheckAll(h, RunLimits(cfg.Watchdog), t.TempDir()) {
		t.Logf("%-16s checked %d, violations %d", r.Check, r.Checked, len(r.Violations))
		for _, v := range r.Violations {
			t.Errorf("%s: %s", r.Check, v.Msg)
		}
	}
}
