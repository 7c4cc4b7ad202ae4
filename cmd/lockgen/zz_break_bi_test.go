package main

// Adversarial tests (branch bi). Each fails on the product as it is and
// names the bug it shows; see the report.

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/runtime"
)

// BUG: inspect -json prints nothing and exits 0 when one time read from
// Redis is outside encoding/json's year range (an owner label's "since",
// a grant-queue score). showInspect drops WriteJSON's error
// (cmd/lockgen/inspect.go print: `_ = inspect.WriteJSON(stdout, v)`).
func TestZZInspectJSONWithOutOfRangeTimeIsSilentSuccess(t *testing.T) {
	s := redistest.Start(t)
	rdb := s.Client(t)
	ctx := context.Background()
	c, err := runtime.NewClient(rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	hold, err := c.Mutex("order:1", runtime.LockOptions{Name: "OrderLock"}).TryLock(ctx, 0, runtime.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	_ = hold
	// A grant-queue entry whose score is -inf (or any score past year 9999).
	if err := rdb.Do(ctx, "ZADD", "lockgen_lock_queue:{order:1}", "-inf", "deadbeef-0000-0000-0000-000000000000:1").Err(); err != nil {
		t.Fatal(err)
	}
	spec := "../../inspect/testdata/locks.yaml"
	code, out, errs := runCLI(t, "inspect", "-config", spec, "-redis", s.URL(), "-json", "OrderLock", "orderID=1")
	if out == "" && code == exitOK {
		t.Fatalf("inspect -json exited %d with empty stdout and stderr %q: a script reads 'success, no data'", code, errs)
	}
	// The table view of the same instance works.
	code, out, _ = runCLI(t, "inspect", "-config", spec, "-redis", s.URL(), "OrderLock", "orderID=1")
	t.Logf("table: exit %d\n%s", code, out)
}

// BUG (vet, false positive): a TryLock with a constant wait of 0 never
// waits, so it cannot close a deadlock cycle, yet it is an edge of the
// lock order: try-and-back-off, the textbook way out of an inversion, is
// reported as one. walk.go take() adds edges whatever a.NoWait says
// (NoWait is only consulted by the nested check, nested.go:18).
func TestZZVetTryLockWithZeroWaitIsNoLockOrderEdge(t *testing.T) {
	dir := zzVetModule(t, `package svc

import (
	"context"

	"example.com/app/locks"
	"github.com/lockgen/lockgen/runtime"
)

type S struct{ l *locks.Locks }

func (s *S) A(ctx context.Context, id int64, sku string) error {
	return s.l.WithOrderLock(ctx, id, func(hctx context.Context) error {
		return s.l.WithInventoryLock(hctx, sku, func(context.Context) error { return nil })
	})
}

// Only tries OrderLock, never waits for it: no deadlock with A.
func (s *S) B(ctx context.Context, id int64, sku string) error {
	return s.l.WithInventoryLock(ctx, sku, func(hctx context.Context) error {
		m := s.l.OrderLock(id)
		h, err := m.TryLock(hctx, 0, runtime.Watchdog)
		if err != nil {
			return nil // busy: skip this round
		}
		return m.Unlock(h)
	})
}
`)
	_ = dir
	code, out, errs := runCLI(t, "vet", "./...")
	if code != exitOK || errs != "" {
		t.Fatalf("lockgen vet exited %d on a try-and-skip that cannot deadlock:\n%s%s", code, out, errs)
	}
}

// BUG (vet, false negative): a hold's ctx used after its Unlock, to take
// another lock, is not reported (the escape check covers only With<Name>
// fns; unlock checks only Unlock's own argument).
func TestZZVetHoldCtxUsedAfterUnlockIsNotReported(t *testing.T) {
	zzVetModule(t, `package svc

import (
	"context"

	"example.com/app/locks"
)

type S struct{ l *locks.Locks }

func (s *S) U(ctx context.Context, id int64, sku string) error {
	m := s.l.OrderLock(id)
	hctx, err := m.Lock(ctx)
	if err != nil {
		return err
	}
	_ = m.Unlock(hctx)
	return s.l.WithInventoryLock(hctx, sku, func(context.Context) error { return nil })
}
`)
	code, out, errs := runCLI(t, "vet", "./...")
	if code == exitOK {
		t.Fatalf("lockgen vet exited 0 on hctx used after m.Unlock(hctx):\n%s%s", out, errs)
	}
}

const zzVetSpec = `version: 1
package: locks
locks:
  OrderLock:
    key: "order:${id}"
    params: {id: int64}
  InventoryLock:
    kind: fair
    key: "inventory:${sku}"
    params: {sku: string}
`

func zzVetModule(t *testing.T, svc string) string {
	t.Helper()
	dir := tempModule(t)
	for name, src := range map[string]string{"locks/locks.yaml": zzVetSpec, "svc/svc.go": svc} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if code, out, errOut := runCLI(t, "-config", filepath.Join(dir, "locks", "locks.yaml")); code != exitOK {
		t.Fatalf("generate exited %d: %s%s", code, out, errOut)
	}
	t.Chdir(dir)
	return dir
}

var _ = strings.Contains

// BUG (vet, false negative): the escape check reports "hctx stored in a
// field" only when hctx (or a derivation) is the whole right-hand side
// (vet/checks.go checkEscapeAssign: w.holdOf(r) on the RHS). Appending it
// to a field slice, storing a struct that carries it, or a closure that
// captures it, all keep the hold's ctx past fn without a report.
func TestZZVetHoldCtxEscapingThroughAppendOrLiteralIsNotReported(t *testing.T) {
	for name, body := range map[string]string{
		"append":  "s.ctxs = append(s.ctxs, hctx)",
		"literal": "s.req = &req{ctx: hctx}",
		"closure": "s.pending = func() { use(hctx) }",
	} {
		t.Run(name, func(t *testing.T) {
			zzVetModule(t, `package svc

import (
	"context"

	"example.com/app/locks"
)

type req struct{ ctx context.Context }

type S struct {
	l       *locks.Locks
	ctxs    []context.Context
	req     *req
	pending func()
}

func use(context.Context) {}

func (s *S) E(ctx context.Context, id int64) error {
	return s.l.WithOrderLock(ctx, id, func(hctx context.Context) error {
		`+body+`
		return nil
	})
}
`)
			code, out, errs := runCLI(t, "vet", "./...")
			if code == exitOK {
				t.Fatalf("lockgen vet exited 0 on %q inside fn:\n%s%s", body, out, errs)
			}
		})
	}
}

// Finding: one -redis URL of a Redis Cluster node without -cluster is
// taken for a single server (inspect.Connect): the summary and a lock's
// instance list then silently cover that node's slots only (exit 0, no
// warning), and a single instance whose key lives elsewhere fails with a
// bare "MOVED <slot> <addr>". Inspect could tell (the node answers SCAN
// and refuses keys with MOVED; CLUSTER INFO / INFO cluster says so).
func TestZZInspectOneClusterNodeWithoutClusterFlagIsSilentlyPartial(t *testing.T) {
	cl := redistest.StartCluster(t)
	rdb := cl.Client(t)
	ctx := context.Background()
	c, err := runtime.NewClient(rdb, nil)
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
	code, out, errs := runCLI(t, "inspect", "-config", spec, "-redis", node, "OrderLock")
	n := strings.Count(out, "\nOrderLock ")
	if code == exitOK && n < 12 {
		t.Errorf("inspect -redis <one cluster node> OrderLock: exit 0 listing %d of 12 live instances, no warning (stderr %q):\n%s", n, errs, out)
	}
	var other string
	for i := range 12 {
		if cl.MasterForKey("order:"+strconv.Itoa(i)).Addr() != cl.Masters()[0].Addr() {
			other = strconv.Itoa(i)
			break
		}
	}
	code, out, errs = runCLI(t, "inspect", "-config", spec, "-redis", node, "OrderLock", "orderID="+other)
	t.Logf("instance on another master: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	if strings.HasPrefix(strings.TrimPrefix(errs, "lockgen inspect: "), "MOVED") {
		t.Errorf("a key on another master fails with a bare %q: no hint to pass -cluster", strings.TrimSpace(errs))
	}
}
