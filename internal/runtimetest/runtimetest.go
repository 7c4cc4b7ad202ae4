// Package runtimetest holds what the tests of package runtime share with
// its slowest fault tests, which live in runtime/faulttest: the deadline
// invariant under every fault of design.md §7 for every kind
// (overlap_test.go) and Redis Cluster failover (failover_test.go).
package runtimetest

import (
	"bufio"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime"
)

// NewClient returns a lock Client on rdb, closed when the test ends. It
// logs nowhere unless opts sets a Logger.
func NewClient(t testing.TB, rdb redis.UniversalClient, opts *runtime.Options) *runtime.Client {
	t.Helper()
	o := runtime.Options{}
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	c, err := runtime.NewClient(rdb, &o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Eventually polls cond every 5ms until it holds or d passes.
func Eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Ctx is a ctx for a test's calls: it ends after a minute, or with the
// test.
func Ctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// SkipShortOutsideCI skips a long test (one that takes more than about
// 2 s: partitions, restarts, failovers, a cluster, leases run out on
// purpose, a soak) under go test -short on a developer's machine, so that
// the quick mode stays at about 2 minutes on 2 cores. Under CI (CI set) it
// never skips, whatever the flags.
func SkipShortOutsideCI(t *testing.T) {
	t.Helper()
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("a long fault or soak test; skipped with -short (never under CI)")
	}
}

// StartChild starts the test binary as a child process in role (the
// environment variable LOCKGEN_CHILD, which the package's TestMain reads)
// with env, and returns it with its stdout. The child is killed when the
// test ends.
func StartChild(t testing.TB, role string, env ...string) (*exec.Cmd, *bufio.Reader) {
	t.Helper()
	cmd := ChildCmd(role, env...)
	return cmd, Start(t, cmd)
}

// Start starts cmd (its other pipes set up by the caller) and returns its
// stdout; the process is killed when the test ends.
func Start(t testing.TB, cmd *exec.Cmd) *bufio.Reader {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return bufio.NewReader(out)
}

// ChildCmd is the command StartChild starts: the test binary, running no
// test, in role with env, its stderr the test's. It dies with the test
// binary: a binary that crashed (its cleanups never ran) once left
// children holding locks that reconnected for good to their server's
// port, which another package's test binary, running beside it, may have
// taken for a server of its own.
func ChildCmd(role string, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{"LOCKGEN_CHILD=" + role}, env...)...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}
