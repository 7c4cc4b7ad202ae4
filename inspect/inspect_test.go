package inspect_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen"
	"github.com/lockgen/lockgen/inspect"
	"github.com/lockgen/lockgen/internal/faultproxy"
	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/runtime"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestMain runs a child process that holds a lock when LOCKGEN_INSPECT_CHILD
// names a Redis address: it prints "held" and holds until stdin closes.
func TestMain(m *testing.M) {
	if addr := os.Getenv("LOCKGEN_INSPECT_CHILD"); addr != "" {
		os.Exit(child(addr, os.Getenv("LOCKGEN_INSPECT_CHILD_MODE")))
	}
	os.Exit(m.Run())
}

// child holds order:7; in mode "wait" it also waits for order:8 (which
// the parent holds) and says "held" once its waiter is queued in Redis.
func child(addr, mode string) int {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	c, err := runtime.NewClient(rdb, &runtime.Options{Name: "child"})
	if err != nil {
		fmt.Println(err)
		return 1
	}
	ctx := context.Background()
	hctx, err := c.Mutex("order:7", runtime.LockOptions{Name: "OrderLock"}).TryLock(ctx, 0, runtime.Watchdog)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	// The label is written by the watchdog loop as it starts: wait for it.
	for rdb.Exists(ctx, runtime.OwnerLabelKey(c.ID())).Val() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	wctx, stop := context.WithCancel(ctx)
	if mode == "wait" {
		go func() {
			_, _ = c.Mutex("order:8", runtime.LockOptions{Name: "OrderLock"}).TryLock(wctx, runtime.Forever, runtime.Watchdog)
		}()
		for rdb.ZCard(ctx, "lockgen_lock_queue:{order:8}").Val() == 0 {
			time.Sleep(5 * time.Millisecond)
		}
	}
	fmt.Println("held")
	_, _ = os.Stdin.Read(make([]byte, 1))
	stop()
	_ = c.Mutex("order:7", runtime.LockOptions{}).Unlock(hctx)
	_ = c.Close()
	return 0
}

// startChild starts the child process (see child) on the server at addr
// and returns its pid once it says "held"; it ends with the test.
func startChild(t *testing.T, addr, mode string) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "LOCKGEN_INSPECT_CHILD="+addr, "LOCKGEN_INSPECT_CHILD_MODE="+mode)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // dies with the test binary
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stdin.Close(); _ = cmd.Wait() })
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	if line != "held\n" {
		t.Fatalf("child: %q, want held", line)
	}
	return cmd.Process.Pid
}

// inspector is an Inspector of spec's locks on a server of its own.
func inspector(t *testing.T) (*inspect.Inspector, *redis.Client) {
	rdb := redistest.Start(t).Client(t)
	return &inspect.Inspector{Spec: spec(t), Redis: rdb}, rdb
}

func spec(t *testing.T) *lockgen.Spec {
	t.Helper()
	src, err := os.ReadFile("testdata/locks.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := lockgen.Parse("locks.yaml", src)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func lockClient(t *testing.T, rdb redis.UniversalClient, o runtime.Options) *runtime.Client {
	t.Helper()
	c, err := runtime.NewClient(rdb, &o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func hold(t *testing.T, ctx context.Context, m interface {
	TryLock(context.Context, time.Duration, time.Duration) (context.Context, error)
}) context.Context {
	t.Helper()
	h, err := m.TryLock(ctx, 0, runtime.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// labelled waits until c's owner label is in Redis.
func labelled(t *testing.T, rdb redis.UniversalClient, c *runtime.Client) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for rdb.Exists(context.Background(), runtime.OwnerLabelKey(c.ID())).Val() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no owner label within 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

var (
	uuidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	durRE  = regexp.MustCompile(`\b([0-9]+(\.[0-9]+)?(ms|µs|ns|h|m|s))+\b`)
	pidRE  = regexp.MustCompile(`pid [0-9]+`)
	// permitRE is a semaphore permit id: 16 random bytes, shown in hex.
	permitRE = regexp.MustCompile(`\b[0-9a-f]{32}\b`)
	wsRE     = regexp.MustCompile(` {2,}`)
)

// normalise makes output comparable across runs: uuids, durations, pids
// and the host name are replaced, and runs of alignment spaces collapsed
// (column widths follow the durations' widths).
func normalise(s string) string {
	host, _ := os.Hostname()
	s = uuidRE.ReplaceAllString(s, "<uuid>")
	s = durRE.ReplaceAllString(s, "<dur>")
	s = pidRE.ReplaceAllString(s, "pid <pid>")
	s = permitRE.ReplaceAllString(s, "<permit>")
	if host != "" {
		s = strings.ReplaceAll(s, " "+host, " <host>")
		s = regexp.MustCompile(`\b[0-9]+@`+regexp.QuoteMeta(host)+`\b`).ReplaceAllString(s, "<pid>@<host>")
	}
	return wsRE.ReplaceAllString(s, "  ")
}

var jsonVarying = regexp.MustCompile(`"(ttl_ms|deadline_ms|waited_ms|pid|since|client_started|host|id)": ("[^"]*"|[0-9-]+)`)

// normaliseJSON replaces the values that differ between runs.
func normaliseJSON(s string) string {
	s = uuidRE.ReplaceAllString(s, "<uuid>")
	return jsonVarying.ReplaceAllString(s, `"$1": "<$1>"`)
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if strings.HasSuffix(name, ".json") {
		got = normaliseJSON(got)
	} else {
		got = normalise(got)
	}
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./inspect -update to write it)", err)
	}
	if got != string(want) {
		t.Fatalf("%s differs from the golden file (go test ./inspect -update rewrites it)\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func table(t *testing.T, st inspect.Instance) string {
	var b bytes.Buffer
	if err := inspect.WriteInstance(&b, st); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestInspectShowsEveryKindAsTheRuntimeWroteIt(t *testing.T) {
	s := redistest.Start(t)
	rdb := s.Client(t)
	c := lockClient(t, rdb, runtime.Options{Name: "api"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// reentrant, held twice by one owner
	order := c.Mutex("order:42", runtime.LockOptions{Name: "OrderLock"})
	o1 := hold(t, ctx, order)
	hold(t, o1, order)
	// fair, held, with one waiter queued
	inv := c.FairLock("inventory:sku-1", runtime.LockOptions{Name: "InventoryLock"})
	hold(t, ctx, inv)
	wctx, stopWaiter := context.WithCancel(ctx)
	defer stopWaiter()
	go func() { _, _ = inv.TryLock(wctx, runtime.Forever, runtime.Watchdog) }()
	waitFor(t, func() bool { return rdb.LLen(ctx, "redisson_lock_queue:{inventory:sku-1}").Val() == 1 })
	// readwrite, read by two owners
	cat := c.ReadWrite("catalog:shop", runtime.LockOptions{Name: "Catalog", WritersFirst: true})
	hold(t, ctx, cat.Read())
	hold(t, ctx, cat.Read())
	go func() { _, _ = cat.Write().TryLock(wctx, runtime.Forever, runtime.Watchdog) }()
	waitFor(t, func() bool { return rdb.ZCard(ctx, "lockgen_rwlock_writers:{catalog:shop}").Val() == 1 })
	labelled(t, rdb, c)
	// a Redisson owner: a hash field no lockgen client labels
	rdb.HSet(ctx, "order:43", "4c6ad8a2-6bd1-4b0b-9f7e-3d3c9a0e1f55:57", 1)
	rdb.PExpire(ctx, "order:43", 30*time.Second)

	// fenced: taken and released once, then held with a re-entry, so the
	// last token handed out is the third
	ledger := c.FencedLock("ledger:7", runtime.LockOptions{Name: "LedgerLock"})
	l1, _, err := ledger.TryLockFenced(ctx, 0, runtime.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	if err := ledger.Unlock(l1); err != nil {
		t.Fatal(err)
	}
	l2, _, err := ledger.TryLockFenced(ctx, 0, runtime.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	if _, token, err := ledger.TryLockFenced(l2, 0, runtime.Watchdog); err != nil || token != 3 {
		t.Fatalf("re-entry: token %d, %v; want 3", token, err)
	}
	// semaphore of 3 permits: one held with the watchdog, one with a fixed
	// minute, and one whose 50ms lease ran out (not reclaimed yet: no
	// script has run since, so it is still in the zset, but it is free)
	slots := runtime.SemaphoreOptions{Name: "PaymentSlots", Permits: 3}
	if _, err := c.Semaphore("payslots:acme", slots).TryAcquire(ctx, 1, 0); err != nil {
		t.Fatal(err)
	}
	slots.Lease = time.Minute
	if _, err := c.Semaphore("payslots:acme", slots).TryAcquire(ctx, 1, 0); err != nil {
		t.Fatal(err)
	}
	slots.Lease = 50 * time.Millisecond
	short, err := c.Semaphore("payslots:acme", slots).TryAcquire(ctx, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	<-short.Done() // its lease ended; wait until the server's clock passed its score too
	waitFor(t, func() bool {
		now := rdb.Time(ctx).Val().UnixMilli()
		n, _ := rdb.ZCount(ctx, "{payslots:acme}:timeout", "-inf", strconv.FormatInt(now, 10)).Result()
		return n == 1
	})
	// latch armed with 3 and counted down once
	imp := c.Latch("import:b1", runtime.LatchOptions{Name: "ImportDone", Count: 3})
	if armed, err := imp.Arm(ctx); err != nil || !armed {
		t.Fatalf("arm: %v, %v", armed, err)
	}
	if err := imp.CountDown(ctx); err != nil {
		t.Fatal(err)
	}

	in := &inspect.Inspector{Spec: spec(t), Redis: rdb}
	var syncs []inspect.Instance
	for _, tc := range []struct {
		golden string
		lock   string
		params map[string]string
		held   bool
	}{
		{"reentrant", "OrderLock", map[string]string{"orderID": "42"}, true},
		{"redisson", "OrderLock", map[string]string{"orderID": "43"}, true},
		{"free", "OrderLock", map[string]string{"orderID": "44"}, false},
		{"fair", "InventoryLock", map[string]string{"sku": "sku-1"}, true},
		{"readwrite", "Catalog", map[string]string{"shopID": "shop"}, true},
		{"multi", "CheckoutLock", map[string]string{"orderID": "42", "sku": "sku-1"}, true},
		{"fenced", "LedgerLock", map[string]string{"accountID": "7"}, true},
		{"semaphore", "PaymentSlots", map[string]string{"provider": "acme"}, true},
		{"latch", "ImportDone", map[string]string{"batchID": "b1"}, true},
		{"latch-open", "ImportDone", map[string]string{"batchID": "b2"}, false},
	} {
		st, err := in.Instance(ctx, tc.lock, tc.params)
		if err != nil {
			t.Fatalf("%s: %v", tc.golden, err)
		}
		if st.Held != tc.held {
			t.Errorf("%s: held %v, want %v", tc.golden, st.Held, tc.held)
		}
		golden(t, tc.golden, table(t, st))
		if st.Kind == "semaphore" || st.Kind == "latch" || st.Token != nil {
			syncs = append(syncs, st)
		}
	}
	// What the golden files show, checked as values too.
	if f, s, l := syncs[0], syncs[1], syncs[2]; f.Token == nil || *f.Token != 3 ||
		len(f.Holders) != 1 || f.Holders[0].Count != 2 ||
		s.Free == nil || *s.Free != 1 || len(s.Permits) != 2 ||
		l.Count == nil || *l.Count != 2 || l.TTL != inspect.NoExpiry || !f.Fenced {
		t.Fatalf("fenced %+v\nsemaphore %+v\nlatch %+v\nwant token 3 held twice; 1 free and 2 permits held; count 2, no TTL", f, s, l)
	}
	if p := syncs[1].Permits; p[0].Expiry <= 0 || p[0].Expiry > inspect.Duration(time.Minute) ||
		p[1].Expiry <= 0 || p[1].Expiry > inspect.Duration(time.Minute) {
		t.Fatalf("permits %+v: want each with its own expiry, within a minute", p)
	}

	list, truncated, err := in.Instances(ctx, "OrderLock")
	if err != nil || truncated || len(list) != 2 || list[0].Key != "order:42" || list[1].Key != "order:43" {
		t.Fatalf("OrderLock instances %+v, %v, %v: want order:42 and order:43", list, truncated, err)
	}
	in.Limit = 1
	if list, truncated, _ := in.Instances(ctx, "OrderLock"); len(list) != 1 || !truncated {
		t.Fatalf("with -limit 1: %d instances, truncated %v", len(list), truncated)
	}
	in.Limit = 0
	sum, err := in.Summary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	_ = inspect.WriteSummary(&b, sum, inspect.DefaultLimit)
	golden(t, "summary", b.String())
	b.Reset()
	_ = inspect.WriteJSON(&b, list)
	golden(t, "instances.json", b.String())
	b.Reset()
	_ = inspect.WriteJSON(&b, syncs)
	golden(t, "sync.json", b.String())
	b.Reset()
	for _, lock := range []string{"LedgerLock", "PaymentSlots", "ImportDone"} {
		list, _, err := in.Instances(ctx, lock)
		if err != nil || len(list) != 1 {
			t.Fatalf("%s instances %+v, %v: want one", lock, list, err)
		}
		_ = inspect.WriteInstances(&b, list, false, inspect.DefaultLimit)
	}
	golden(t, "sync-instances", b.String())
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestInspectNamesTheProcessOfAHoldTakenByAnother(t *testing.T) {
	s := redistest.Start(t)
	pid := startChild(t, s.Addr(), "")
	in := &inspect.Inspector{Spec: spec(t), Redis: s.Client(t)}
	st, err := in.Instance(context.Background(), "OrderLock", map[string]string{"orderID": "7"})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Holders) != 1 || st.Holders[0].Who.PID != pid || st.Holders[0].Who.Name != "child" {
		t.Fatalf("holders %+v, want the child's pid %d and name child", st.Holders, pid)
	}
	if text := table(t, st); !strings.Contains(text, fmt.Sprintf("lockgen pid %d on ", pid)) {
		t.Fatalf("table does not show the child's pid %d:\n%s", pid, text)
	}
}

func TestInspectFindsInstancesOnEveryClusterMaster(t *testing.T) {
	cl := redistest.StartCluster(t)
	rdb := cl.Client(t)
	c := lockClient(t, rdb, runtime.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var keys []string
	for i := range 12 {
		key := fmt.Sprintf("order:%d", i)
		hold(t, ctx, c.Mutex(key, runtime.LockOptions{Name: "OrderLock"}))
		keys = append(keys, key)
	}
	hold(t, ctx, c.Mutex("report:{acme}:3", runtime.LockOptions{Name: "TenantReportLock"}))
	hold(t, ctx, c.Mutex("{jobs}:nightly*[mon]", runtime.LockOptions{Name: "Nightly"}))
	// Keys the globs match but the patterns do not.
	rdb.HSet(ctx, "order:x", "a:1", 1)
	rdb.HSet(ctx, "{jobs}:nightly-[mon]", "a:1", 1)

	masters := map[string]bool{}
	for _, k := range keys {
		masters[cl.MasterForKey(k).Addr()] = true
	}
	if len(masters) < 2 {
		t.Fatalf("the keys landed on %d master(s): the test needs several", len(masters))
	}
	in := &inspect.Inspector{Spec: spec(t), Redis: rdb}
	list, _, err := in.Instances(ctx, "OrderLock")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != len(keys) {
		t.Fatalf("%d OrderLock instances on the cluster, want %d", len(list), len(keys))
	}
	for _, st := range list {
		if !st.Held || st.Params["orderID"] == "" {
			t.Fatalf("instance %+v: want held, with its orderID", st)
		}
	}
	for lock, want := range map[string]string{"TenantReportLock": "report:{acme}:3", "Nightly": "{jobs}:nightly*[mon]"} {
		list, _, err := in.Instances(ctx, lock)
		if err != nil || len(list) != 1 || list[0].Key != want {
			t.Fatalf("%s instances %+v (%v), want only %s", lock, list, err, want)
		}
	}
	st, err := in.Instance(ctx, "Nightly", map[string]string{"day": "mon"})
	if err != nil || !st.Held {
		t.Fatalf("Nightly day=mon: %+v, %v", st, err)
	}
}

func TestInspectReadsARedLockOnEachNode(t *testing.T) {
	servers := redistest.StartN(t, 3)
	var nodes []redis.UniversalClient
	var addrs []string
	for _, s := range servers {
		nodes = append(nodes, s.Client(t))
		addrs = append(addrs, s.Addr())
	}
	main := redistest.Start(t).Client(t)
	c := lockClient(t, main, runtime.Options{RedLockNodes: nodes})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hold(t, ctx, c.RedLock("payment:p1", runtime.LockOptions{Name: "PaymentLock"}))
	for _, n := range nodes { // each node's client writes its label there
		waitFor(t, func() bool {
			keys, _, _ := n.Scan(ctx, 0, "lockgen_owner:*", 100).Result()
			return len(keys) == 1
		})
	}
	in := &inspect.Inspector{Spec: spec(t), Redis: main, RedNodes: nodes, RedAddrs: addrs}
	st, err := in.Instance(ctx, "PaymentLock", map[string]string{"paymentID": "p1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Nodes) != 3 || !st.Held {
		t.Fatalf("red lock state %+v, want held on 3 nodes", st)
	}
	for _, n := range st.Nodes {
		if !n.Held || len(n.Holders) != 1 || n.Holders[0].Who.Redisson {
			t.Fatalf("node %s: %+v, want held by a labelled lockgen owner", n.Node, n)
		}
	}
	list, _, err := in.Instances(ctx, "PaymentLock")
	if err != nil || len(list) != 1 {
		t.Fatalf("PaymentLock instances %+v, %v", list, err)
	}
}

func TestInspectRefusesWhatItCannotAnswer(t *testing.T) {
	s := redistest.Start(t)
	in := &inspect.Inspector{Spec: spec(t), Redis: s.Client(t)}
	ctx := context.Background()
	for _, tc := range []struct {
		lock   string
		params map[string]string
		want   string
	}{
		{"OrderLok", nil, "did you mean OrderLock"},
		{"OrderLock", map[string]string{"orderId": "1"}, "did you mean orderID"},
		{"OrderLock", map[string]string{"orderID": "x"}, "not an integer"},
		{"TenantReportLock", map[string]string{"tenant": "a"}, "needs month="},
		{"TenantReportLock", map[string]string{"tenant": "a", "month": "300"}, `month="300": out of uint8's range (write 0 to 255)`},
		{"OrderLock", map[string]string{"orderID": "99999999999999999999"}, `orderID="99999999999999999999": out of int64's range (write -9223372036854775808 to 9223372036854775807)`},
		{"InventoryLock", map[string]string{"sku": `"\xff`}, `sku="\"\\xff": not a Go-quoted string`},
	} {
		_, err := in.Instance(ctx, tc.lock, tc.params)
		if !inspect.IsUsage(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %v: %v, want a usage error saying %q", tc.lock, tc.params, err, tc.want)
		}
	}
}

func TestJSONWritesNoExpiryAsPTTLDoes(t *testing.T) {
	var b bytes.Buffer
	if err := inspect.WriteJSON(&b, []inspect.Duration{inspect.NoExpiry, 0, inspect.Duration(1500 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(strings.Fields(b.String()), ""); got != "[-1,0,1500]" {
		t.Fatalf("durations as JSON: %s, want [-1,0,1500] (no expiry, absent, 1.5s)", got)
	}
}

func TestInspectReportsAnUnreadableFencingTokenAndKeepsTheSummary(t *testing.T) {
	in, rdb := inspector(t)
	ctx := context.Background()
	rdb.HSet(ctx, "ledger:1", "4c6ad8a2-6bd1-4b0b-9f7e-3d3c9a0e1f55:1", 1)
	rdb.Set(ctx, "redisson_lock_token:{ledger:1}", "not-a-number", 0)
	rdb.HSet(ctx, "order:1", "4c6ad8a2-6bd1-4b0b-9f7e-3d3c9a0e1f55:1", 1)

	live := liveBySummary(t, in)
	if live["LedgerLock"] != 1 || live["OrderLock"] != 1 {
		t.Errorf("live instances %v, want LedgerLock 1 and OrderLock 1", live)
	}
	st, err := in.Instance(ctx, "LedgerLock", map[string]string{"accountID": "1"})
	if err != nil {
		t.Fatalf("LedgerLock accountID=1: %v, want its state", err)
	}
	const want = "redisson_lock_token:{ledger:1} does not hold a decimal token: is the spec the one the application uses?"
	if st.Token != nil || st.TokenUnreadable != want {
		t.Errorf("token %v, unreadable %q; want none and %q", st.Token, st.TokenUnreadable, want)
	}
	if got := normalise(table(t, st)); !strings.Contains(got, "token  unreadable: "+want) {
		t.Errorf("table does not say the token is unreadable:\n%s", got)
	}
}

func TestInspectTablesQuoteValuesThatAreNotPrintable(t *testing.T) {
	in, rdb := inspector(t)
	ctx := context.Background()
	const sku = "\x1b[31mRED\x1b[0m\nfake line"
	const owner = "evil\x1b[2J:1"
	rdb.HSet(ctx, "inventory:"+sku, owner, 1)

	list, _, err := in.Instances(ctx, "InventoryLock")
	if err != nil || len(list) != 1 {
		t.Fatalf("InventoryLock instances %+v, %v; want 1", list, err)
	}
	var b bytes.Buffer
	if err := inspect.WriteInstances(&b, list, false, 0); err != nil {
		t.Fatal(err)
	}
	want := `LOCK  KEY  PARAMS  STATE  OWNERS  WAITING
InventoryLock  "inventory:\x1b[31mRED\x1b[0m\nfake line"  sku="\x1b[31mRED\x1b[0m\nfake line"  held, ttl never  redisson  0
`
	// (only alignment is collapsed: normalise would take "0m" for a duration)
	if got := wsRE.ReplaceAllString(b.String(), "  "); got != want {
		t.Errorf("instances table:\n%s\nwant:\n%s", got, want)
	}
	want = `lock  InventoryLock (fair)
key  "inventory:\x1b[31mRED\x1b[0m\nfake line"
state  held, ttl never
holder  "evil\x1b[2J:1"  ×1  redisson (no lockgen label)
`
	if got := wsRE.ReplaceAllString(table(t, list[0]), "  "); got != want {
		t.Errorf("instance table:\n%s\nwant:\n%s", got, want)
	}
	// JSON escapes anyway: it carries the values exactly.
	b.Reset()
	if err := inspect.WriteJSON(&b, list[0]); err != nil {
		t.Fatal(err)
	}
	var back inspect.Instance
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.Key != "inventory:"+sku || back.Params["sku"] != sku || back.Holders[0].Owner != owner {
		t.Errorf("JSON key %q, sku %q, owner %q; want them exact", back.Key, back.Params["sku"], back.Holders[0].Owner)
	}
}

func TestInspectListsOnlyKeysAGeneratedHelperCouldHaveMade(t *testing.T) {
	in, rdb := inspector(t)
	ctx := context.Background()
	const owner = "4c6ad8a2-6bd1-4b0b-9f7e-3d3c9a0e1f55:1"
	for _, key := range []string{
		"order:12", "order:99999999999999999999", "order:007", "order:-0", // int64
		"report:{x}:12", "report:{x}:300", // uint8
		"inventory:a%25b%7B", "inventory:a%b", "inventory:a%7b", // escaped strings
		"inventory:\xff\xfe", "inventory:\"q", // not UTF-8, a leading quote
	} {
		rdb.HSet(ctx, key, owner, 1)
	}
	for _, tc := range []struct {
		lock   string
		params []map[string]string
	}{
		{"OrderLock", []map[string]string{{"orderID": "12"}}},
		{"TenantReportLock", []map[string]string{{"tenant": "x", "month": "12"}}},
		{"InventoryLock", []map[string]string{{"sku": "\"q"}, {"sku": "a%b{"}, {"sku": "\xff\xfe"}}},
	} {
		list, _, err := in.Instances(ctx, tc.lock)
		if err != nil {
			t.Fatalf("%s: %v", tc.lock, err)
		}
		var got []map[string]string
		for _, st := range list {
			got = append(got, st.Params)
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.params) {
			t.Errorf("%s instances with params %q, want only %q", tc.lock, got, tc.params)
		}
		// Each listed instance is one the lock's own view reads, from
		// its params as the JSON carries them.
		var b bytes.Buffer
		if err := inspect.WriteJSON(&b, list); err != nil {
			t.Fatal(err)
		}
		var back []struct {
			Key    string            `json:"key"`
			Params map[string]string `json:"params"`
		}
		if err := json.Unmarshal(b.Bytes(), &back); err != nil {
			t.Fatal(err)
		}
		for i, j := range back {
			st, err := in.Instance(ctx, tc.lock, j.Params)
			if err != nil || st.Key != list[i].Key || !st.Held {
				t.Errorf("%s %q from JSON: key %q held %v, %v; want %q held", tc.lock, j.Params, st.Key, st.Held, err, list[i].Key)
			}
		}
	}
	var b bytes.Buffer
	st, _ := in.Instance(ctx, "InventoryLock", map[string]string{"sku": "\xff\xfe"})
	if err := inspect.WriteJSON(&b, st); err != nil {
		t.Fatal(err)
	}
	if want := `"key": "\"inventory:\\xff\\xfe\""`; !strings.Contains(b.String(), want) {
		t.Errorf("JSON of a key that is not UTF-8:\n%s\nwant it Go-quoted: %s", b.String(), want)
	}
}

// A key pattern that is one string param matches any key without braces,
// the runtime's own owner labels (lockgen_owner:<uuid>, hashes) and
// lockgen_*/redisson_* helper keys among them: they were listed as held
// instances. Names under those prefixes are the runtime's (or
// Redisson's), not a lock's.
func TestInspectDoesNotListTheRuntimesOwnKeysAsInstances(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	ctx := context.Background()
	s, err := lockgen.Parse("locks.yaml", []byte("version: 1\npackage: locks\nlocks:\n  JobLock:\n    key: \"${job}\"\n    params: {job: string}\n"))
	if err != nil {
		t.Fatal(err)
	}
	in := &inspect.Inspector{Spec: s, Redis: rdb}
	c := lockClient(t, rdb, runtime.Options{Name: "worker"})
	hold(t, ctx, c.Mutex("nightly-report", runtime.LockOptions{Name: "JobLock"}))
	labelled(t, rdb, c)
	rdb.HSet(ctx, "redisson_stray", "deadbeef-0000-0000-0000-000000000000:1", 1)
	list, _, err := in.Instances(ctx, "JobLock")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Key != "nightly-report" {
		var keys []string
		for _, st := range list {
			keys = append(keys, st.Key)
		}
		t.Errorf("JobLock instances %q, want only [nightly-report]", keys)
	}
}

// One helper key of the wrong type (a stray SET over a lock's queue,
// writers or permits) once failed the whole summary, hiding every other
// lock's holds. Each is now a note on its instance (Unreadable), read
// like an unreadable fencing token: the rest is shown all the same.
func TestInspectNotesAWrongTypedHelperKeyAndKeepsTheSummary(t *testing.T) {
	in, rdb := inspector(t)
	ctx := context.Background()
	const owner = "4c6ad8a2-6bd1-4b0b-9f7e-3d3c9a0e1f55:1"
	rdb.HSet(ctx, "order:1", owner, 1)
	rdb.HSet(ctx, "order:2", owner, 1)
	rdb.Set(ctx, "lockgen_lock_queue:{order:2}", "junk", 0)
	rdb.HSet(ctx, "inventory:sku-1", owner, 1)
	rdb.RPush(ctx, "redisson_lock_queue:{inventory:sku-1}", "w:1")
	rdb.Set(ctx, "lockgen_fair_waiters:{inventory:sku-1}", "junk", 0)
	rdb.HSet(ctx, "catalog:s1", "mode", "write", owner+":write", 1)
	rdb.Set(ctx, "lockgen_rwlock_writers:{catalog:s1}", "junk", 0)
	rdb.Set(ctx, "payslots:acme", "2", 0)
	rdb.Set(ctx, "{payslots:acme}:timeout", "junk", 0)
	rdb.Set(ctx, "payslots:bad", "not-a-number", 0)

	live := liveBySummary(t, in)
	if live["OrderLock"] != 2 || live["InventoryLock"] != 1 || live["Catalog"] != 1 || live["PaymentSlots"] != 2 {
		t.Errorf("live instances %v, want OrderLock 2, InventoryLock 1, Catalog 1, PaymentSlots 2", live)
	}
	for _, tc := range []struct {
		lock, param, value, note string
		held                     bool
	}{
		{"OrderLock", "orderID", "2", "lockgen_lock_queue:{order:2} is not", true},
		{"InventoryLock", "sku", "sku-1", "lockgen_fair_waiters:{inventory:sku-1} is not", true},
		{"Catalog", "shopID", "s1", "lockgen_rwlock_writers:{catalog:s1} is not", true},
		{"PaymentSlots", "provider", "acme", "{payslots:acme}:timeout is not", false}, // its permits are unreadable
		{"PaymentSlots", "provider", "bad", "payslots:bad does not hold a decimal count", false},
	} {
		st, err := in.Instance(ctx, tc.lock, map[string]string{tc.param: tc.value})
		if err != nil {
			t.Errorf("%s %s=%s: %v, want its state with a note", tc.lock, tc.param, tc.value, err)
			continue
		}
		if st.Held != tc.held || len(st.Unreadable) != 1 || !strings.HasPrefix(st.Unreadable[0], tc.note) {
			t.Errorf("%s %s=%s: held %v, unreadable %q; want held %v, noted %q…", tc.lock, tc.param, tc.value, st.Held, st.Unreadable, tc.held, tc.note)
		}
		if got := normalise(table(t, st)); !strings.Contains(got, "unreadable  "+tc.note) {
			t.Errorf("%s table does not note the unreadable key:\n%s", tc.lock, got)
		}
	}
}

// A lock whose keys Redis refuses to read (here an ACL without them) is a
// row with its error in the summary, not a failure of every lock's.
func TestInspectSummaryKeepsOtherLocksWhenOneCannotBeRead(t *testing.T) {
	s := redistest.Start(t)
	rdb := s.Client(t)
	ctx := context.Background()
	const owner = "4c6ad8a2-6bd1-4b0b-9f7e-3d3c9a0e1f55:1"
	rdb.HSet(ctx, "order:1", owner, 1)
	rdb.Set(ctx, "payslots:acme", "2", 0)
	// Every lock's keys but PaymentSlots' (payslots:*, {payslots:*}).
	if err := rdb.Do(ctx, "ACL", "SETUSER", "reader", "on", ">pw", "-@all", "+@read", "+time", "+scan", "+pubsub",
		"%R~[a-o]*", "%R~[q-z]*", "%R~pay[a-r]*", "%R~{[a-o]*", "%R~{[q-z]*", "%R~{pay[a-r]*").Err(); err != nil {
		t.Fatal(err)
	}
	ro := redis.NewClient(&redis.Options{Addr: s.Addr(), Username: "reader", Password: "pw"})
	t.Cleanup(func() { _ = ro.Close() })
	in := &inspect.Inspector{Spec: spec(t), Redis: ro}
	list, err := in.Summary(ctx)
	if err != nil {
		t.Fatalf("summary: %v, want every lock summarised", err)
	}
	rows := map[string]inspect.Summary{}
	for _, s := range list {
		rows[s.Lock] = s
	}
	if r := rows["OrderLock"]; r.Live != 1 || r.Error != "" {
		t.Errorf("OrderLock row %+v, want 1 live, no error", r)
	}
	if r := rows["PaymentSlots"]; !strings.Contains(r.Error, "NOPERM") {
		t.Errorf("PaymentSlots row %+v, want the NOPERM error", r)
	}
	var b bytes.Buffer
	if err := inspect.WriteSummary(&b, list, 0); err != nil || !strings.Contains(b.String(), "PaymentSlots: not read: ") {
		t.Errorf("summary table (%v) does not say PaymentSlots was not read:\n%s", err, b.String())
	}
}

// Over a slow link a view's reads once went key after key, two to four
// round trips each: 100 instances behind a 100 ms round trip took over
// 20 s. They now run in concurrent batches, owner labels in one pipeline.
func TestInspectReadsManyInstancesInFewRoundTrips(t *testing.T) {
	s := redistest.Start(t)
	rdb := s.Client(t)
	ctx := context.Background()
	for i := range 60 {
		// Each its own client: a label read per owner.
		rdb.HSet(ctx, "order:"+strconv.Itoa(i), fmt.Sprintf("4c6ad8a2-6bd1-4b0b-9f7e-%012d:1", i), 1)
	}
	p := faultproxy.Start(t, s.Addr())
	p.Latency(faultproxy.Both, 25*time.Millisecond)
	slow := redis.NewClient(&redis.Options{Addr: p.Addr()})
	t.Cleanup(func() { _ = slow.Close() })
	in := &inspect.Inspector{Spec: spec(t), Redis: slow}
	start := time.Now()
	list, _, err := in.Instances(ctx, "OrderLock")
	if err != nil || len(list) != 60 {
		t.Fatalf("OrderLock: %d instances, %v; want 60", len(list), err)
	}
	// Key after key: 60 × (3 reads + a label) × 50 ms = 12 s; in batches
	// about 1.4 s. The bound is half the sequential time, so that a loaded
	// box does not fail it while reads one after another still do.
	if d := time.Since(start); d > 6*time.Second {
		t.Errorf("60 instances over a 50 ms round trip took %v, want under half the 12 s of reads one after another", d)
	}
}

// liveBySummary is the live instances of each lock in in's Summary, which
// must list every lock.
func liveBySummary(t *testing.T, in *inspect.Inspector) map[string]int {
	t.Helper()
	list, err := in.Summary(context.Background())
	if err != nil {
		t.Fatalf("summary: %v, want every lock summarised", err)
	}
	live := map[string]int{}
	for _, s := range list {
		live[s.Lock] = s.Live
	}
	return live
}
