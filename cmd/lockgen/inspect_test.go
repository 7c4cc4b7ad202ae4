package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/faultproxy"
	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/runtime"
)

func TestInspectExitCodesTellHeldFromFreeFromUsage(t *testing.T) {
	s := redistest.Start(t)
	c, err := runtime.NewClient(s.Client(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Mutex("order:1", runtime.LockOptions{Name: "OrderLock"}).TryLock(ctx, 0, runtime.Watchdog); err != nil {
		t.Fatal(err)
	}
	imp := c.Latch("import:b1", runtime.LatchOptions{Name: "ImportDone", Count: 2})
	if _, err := imp.Arm(ctx); err != nil {
		t.Fatal(err)
	}
	if err := imp.CountDown(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Semaphore("payslots:acme", runtime.SemaphoreOptions{Name: "PaymentSlots", Permits: 3}).TryAcquire(ctx, 1, 0); err != nil {
		t.Fatal(err)
	}
	spec := "../../inspect/testdata/locks.yaml"
	for _, tc := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"OrderLock", "orderID=1"}, exitOK, "held, ttl"},
		{[]string{"OrderLock", "orderID=2"}, exitFail, "not held"},
		{[]string{"OrderLock"}, exitOK, "order:1"},
		{[]string{"Catalog"}, exitFail, ""},
		{[]string{"ImportDone", "batchID=b1"}, exitOK, "waiting for 1 count-down"},
		{[]string{"ImportDone", "batchID=b2"}, exitFail, "open"},
		{[]string{"PaymentSlots", "provider=acme"}, exitOK, "2 free, 1 held"},
		{[]string{"PaymentSlots", "provider=none"}, exitFail, "not set up"},
		{[]string{"LedgerLock", "accountID=1"}, exitFail, "token  none handed out yet"},
		{nil, exitOK, "TenantReportLock"},
		{[]string{"OrderLok"}, exitUsage, ""},
		{[]string{"OrderLock", "orderID"}, exitUsage, ""},
		{[]string{"OrderLock", "orderID=x"}, exitUsage, ""},
	} {
		args := append([]string{"inspect", "-config", spec, "-redis", s.URL()}, tc.args...)
		code, out, errs := runCLI(t, args...)
		if code != tc.code || !strings.Contains(out, tc.out) {
			t.Errorf("inspect %v: exit %d, want %d; stdout:\n%s\nstderr: %s", tc.args, code, tc.code, out, errs)
		}
	}
	if code, _, errs := runCLI(t, "inspect", "-config", spec, "OrderLock"); code != exitUsage || !strings.Contains(errs, "-redis") {
		t.Errorf("no -redis: exit %d, stderr %q", code, errs)
	}
	// Flags after the name work too, and -json is for scripts.
	code, out, _ := runCLI(t, "inspect", "-config", spec, "OrderLock", "orderID=1", "-redis", s.URL(), "-json")
	var st struct {
		Held    bool
		Holders []struct{ Owner string }
	}
	if err := json.Unmarshal([]byte(out), &st); code != exitOK || err != nil || !st.Held || !strings.HasPrefix(st.Holders[0].Owner, c.ID()+":") {
		t.Fatalf("-json: exit %d, %v, %+v from %s", code, err, st, out)
	}
}

func TestInspectWatchRedrawsUntilInterrupted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
	defer cancel()
	var out strings.Builder
	frames := 0
	code := watchInspect(ctx, 50*time.Millisecond, func() int { frames++; return exitFail }, &out)
	if code != exitFail || frames < 2 || strings.Count(out.String(), "(^C to stop)") != frames {
		t.Fatalf("exit %d after %d frames:\n%s", code, frames, out.String())
	}
}

// A time read from Redis past year 9999 (a grant-queue score of -inf or
// +inf, an owner label's "since") is beyond what encoding/json writes:
// inspect -json once printed nothing and exited 0. Such a time is left
// out (unreadable), and the rest of the instance is printed.
func TestInspectJSONPrintsAnInstanceWithTimesPastYear9999(t *testing.T) {
	s := redistest.Start(t)
	rdb := s.Client(t)
	ctx := context.Background()
	c, err := runtime.NewClient(rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Mutex("order:1", runtime.LockOptions{Name: "OrderLock"}).TryLock(ctx, 0, runtime.Watchdog); err != nil {
		t.Fatal(err)
	}
	queue := "lockgen_lock_queue:{order:1}"
	rdb.ZAdd(ctx, queue, redis.Z{Score: math.Inf(-1), Member: "deadbeef-0000-0000-0000-000000000000:1"})
	rdb.ZAdd(ctx, queue, redis.Z{Score: 2.5e14, Member: "deadbeef-0000-0000-0000-000000000000:2"})
	rdb.HSet(ctx, runtime.OwnerLabelKey(c.ID()), "since", "300000000000000")
	spec := "../../inspect/testdata/locks.yaml"
	code, out, errs := runCLI(t, "inspect", "-config", spec, "-redis", s.URL(), "-json", "OrderLock", "orderID=1")
	var st struct {
		Held  bool
		Queue []struct{ Owner string }
	}
	if err := json.Unmarshal([]byte(out), &st); code != exitOK || err != nil || !st.Held || len(st.Queue) != 2 {
		t.Fatalf("-json: exit %d, %v, %+v; stdout %q, stderr %q", code, err, st, out, errs)
	}
}

// A view over a Redis that answers too slowly stops at -timeout (default
// 10s) with a message naming the flag, not after as long as its reads
// take; -timeout must be positive. The cluster-node probe (INFO) runs
// within the first view's -timeout: it used to get a -timeout of its own,
// then the view another, so the command gave up after twice -timeout.
func TestInspectStopsAViewAtTimeout(t *testing.T) {
	s := redistest.Start(t)
	p := faultproxy.Start(t, s.Addr())
	p.Latency(faultproxy.Both, 5*time.Second)
	spec := "../../inspect/testdata/locks.yaml"
	start := time.Now()
	code, out, errs := runCLI(t, "inspect", "-config", spec, "-redis", "redis://"+p.Addr(), "-timeout", "700ms")
	if d := time.Since(start); code != exitFail || !strings.Contains(errs, "-timeout 700ms") || d >= 1400*time.Millisecond {
		t.Errorf("inspect -timeout 700ms over a 10s round trip: exit %d after %v, stdout %q, stderr %q; want exit 1 before 2 × -timeout, naming -timeout", code, d, out, errs)
	}
	for _, bad := range []string{"0s", "-1s"} {
		if code, _, errs := runCLI(t, "inspect", "-config", spec, "-redis", s.URL(), "-timeout", bad); code != exitUsage || !strings.Contains(errs, "-timeout") {
			t.Errorf("-timeout %s: exit %d, stderr %q; want a usage error", bad, code, errs)
		}
	}
}

// One cluster node's URL without -cluster was read as a single server:
// the summary and a lock's list covered that node's slots only (exit 0,
// 2 of 12 instances), and a key on another master failed with a bare
// "MOVED …". inspect now asks the node (INFO cluster) and refuses with
// a hint to add -cluster; a MOVED reply gets the same hint.
func TestInspectRefusesOneClusterNodeWithoutClusterFlag(t *testing.T) {
	cl := redistest.StartCluster(t)
	ctx := context.Background()
	c, err := runtime.NewClient(cl.Client(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range 12 {
		if _, err := c.Mutex("order:"+strconv.Itoa(i), runtime.LockOptions{Name: "OrderLock"}).TryLock(ctx, 0, runtime.Watchdog); err != nil {
			t.Fatal(err)
		}
	}
	spec := "../../inspect/testdata/locks.yaml"
	node := "redis://" + cl.Masters()[0].Addr()
	for _, args := range [][]string{{"OrderLock"}, {"OrderLock", "orderID=1"}, nil} {
		code, out, errs := runCLI(t, append([]string{"inspect", "-config", spec, "-redis", node}, args...)...)
		if code != exitUsage || out != "" || !strings.Contains(errs, "add -cluster") {
			t.Errorf("inspect %v on one cluster node: exit %d, stdout %q, stderr %q; want exit 2 and a hint to add -cluster", args, code, out, errs)
		}
	}
	code, out, errs := runCLI(t, "inspect", "-config", spec, "-redis", node, "-cluster", "OrderLock")
	if n := strings.Count(out, "\nOrderLock "); code != exitOK || n != 12 {
		t.Errorf("with -cluster: exit %d, %d of 12 instances (stderr %q):\n%s", code, n, errs, out)
	}
	moved := withClusterHint(fmt.Errorf("OrderLock: %w", replyError("MOVED 3300 127.0.0.1:7001")))
	if !strings.Contains(moved.Error(), "add -cluster") {
		t.Errorf("a MOVED reply reads %q, want a hint to add -cluster", moved)
	}
}

// replyError is an error reply as go-redis returns it (a redis.Error).
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

// -limit 0 or below once printed "LIVE 0+" and "more than -5: raise
// -limit" (the tables were given the flag, the reads the default): it
// is a usage error.
func TestInspectRefusesALimitBelowOne(t *testing.T) {
	s := redistest.Start(t)
	spec := "../../inspect/testdata/locks.yaml"
	for _, bad := range []string{"0", "-5"} {
		code, out, errs := runCLI(t, "inspect", "-config", spec, "-redis", s.URL(), "-limit", bad)
		if code != exitUsage || out != "" || !strings.Contains(errs, "-limit "+bad) {
			t.Errorf("-limit %s: exit %d, stdout %q, stderr %q; want a usage error naming -limit", bad, code, out, errs)
		}
	}
}
