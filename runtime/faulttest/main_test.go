package faulttest_test

import (
	"flag"
	"os"
	"testing"
)

// TestMain runs up to 4 tests that call t.Parallel at once, not Go's
// default of GOMAXPROCS (2 here): the parallel tests here wait out leases
// and failovers far more than they compute (the default-watchdog run of
// the deadline matrix waits 30 s), each on servers of its own; the
// cluster failover, whose lags are bounds in time, runs first and alone.
// An explicit -parallel still decides.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", "4")
	}
	os.Exit(m.Run())
}
