package runtime_test

import (
	"os"
	"testing"
)

// skipShortOutsideCI skips a long fault or soak test (one that takes more
// than about 3 s: partitions, restarts, failovers, a cluster, leases run
// out on purpose, a soak) under
// go test -short on a developer's machine, so that the quick mode stays
// under a minute. Under CI (CI set) it never skips, whatever the flags.
func skipShortOutsideCI(t *testing.T) {
	t.Helper()
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("a long fault or soak test; skipped with -short (never under CI)")
	}
}
