package faulttest_test

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/runtimetest"
	"github.com/lockgen/lockgen/runtime"
)

// TestMain runs up to 4 tests that call t.Parallel at once, not Go's
// default of GOMAXPROCS (2 here): the parallel tests here wait out leases
// and failovers far more than they compute (the default-watchdog run of
// the deadline matrix waits 30 s), each on servers of its own; the
// cluster failover, whose lags are bounds in time, runs first and alone.
// An explicit -parallel still decides.
//
// With LOCKGEN_CHILD=soak-worker the test binary is a worker process of
// the soak (soak_test.go) instead.
func TestMain(m *testing.M) {
	if os.Getenv("LOCKGEN_CHILD") == "soak-worker" {
		os.Exit(soakChild())
	}
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", "4")
	}
	os.Exit(m.Run())
}

// soakChild is a soak worker process: a Client on LOCKGEN_ADDR, with
// LOCKGEN_WATCHDOG_MS as its WatchdogTimeout.
func soakChild() int {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("LOCKGEN_ADDR")})
	defer rdb.Close()
	opts := &runtime.Options{}
	if ms, _ := strconv.Atoi(os.Getenv("LOCKGEN_WATCHDOG_MS")); ms > 0 {
		opts.WatchdogTimeout = time.Duration(ms) * time.Millisecond
	}
	c, err := runtime.NewClient(rdb, opts)
	if err != nil {
		fmt.Println(err)
		return 2
	}
	// Shutdown, not Close: it waits for the settlements under way, such
	// as the give-back of what a wait cancelled just as its script ran
	// took (a read hold); Close drops them, and the key then stays until
	// its lease runs out, after the soak has looked (a clean-clone CI run
	// found soak:rw:2 left).
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Shutdown(ctx)
	}()
	return runSoakWorker(c, rdb)
}

// startChild starts the test binary as a child in role with env
// (runtimetest.StartChild).
func startChild(t *testing.T, role string, env ...string) (*exec.Cmd, *bufio.Reader) {
	t.Helper()
	return runtimetest.StartChild(t, role, env...)
}
