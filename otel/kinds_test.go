package lockotel_test

import (
	"context"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/lockgen/lockgen/internal/redistest"
	lockotel "github.com/lockgen/lockgen/otel"
	"github.com/lockgen/lockgen/runtime"
)

// TestTheDocListsEveryLockKindRecorded holds a lock of every kind once
// and checks that the lock.kind values recorded are exactly those the
// package doc lists (issue 26: it left out semaphore), and that a latch,
// which is awaited rather than held, records none.
func TestTheDocListsEveryLockKindRecorded(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	obs, err := lockotel.New(lockotel.Options{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	if err != nil {
		t.Fatal(err)
	}
	servers := redistest.StartN(t, 4)
	var nodes []redis.UniversalClient
	for _, s := range servers[1:] {
		nodes = append(nodes, s.Client(t))
	}
	c, err := runtime.NewClient(servers[0].Client(t), &runtime.Options{Observer: obs, RedLockNodes: nodes})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })

	ctx := context.Background()
	type holdable interface {
		TryLock(ctx context.Context, wait, lease time.Duration) (context.Context, error)
		Unlock(ctx context.Context) error
	}
	rw := c.ReadWrite("catalog", runtime.LockOptions{Name: "Catalog"})
	for _, l := range []holdable{
		c.Mutex("order", runtime.LockOptions{Name: "OrderLock"}),
		c.FencedLock("ledger", runtime.LockOptions{Name: "LedgerLock"}),
		c.FairLock("inventory", runtime.LockOptions{Name: "InventoryLock"}),
		rw.Read(),
		rw.Write(),
		c.MultiLock(runtime.LockOptions{Name: "CheckoutLock"}, c.Mutex("a", runtime.LockOptions{}), c.Mutex("b", runtime.LockOptions{})),
		c.RedLock("payment", runtime.LockOptions{Name: "PaymentLock"}),
	} {
		hctx, err := l.TryLock(ctx, 0, runtime.Watchdog)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(hctx); err != nil {
			t.Fatal(err)
		}
	}
	sem := c.Semaphore("seats", runtime.SemaphoreOptions{Name: "SeatPool", Permits: 1})
	hctx, err := sem.TryAcquire(ctx, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := sem.Release(hctx); err != nil {
		t.Fatal(err)
	}
	latch := c.Latch("import", runtime.LatchOptions{Name: "ImportDone", Count: 1})
	if _, err := latch.Arm(ctx); err != nil {
		t.Fatal(err)
	}
	if err := latch.CountDown(ctx); err != nil {
		t.Fatal(err)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	var recorded []string
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "lockgen.lock.acquisitions" {
				continue
			}
			for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
				name, _ := p.Attributes.Value("lock.name")
				kind, _ := p.Attributes.Value("lock.kind")
				if name.AsString() == "ImportDone" {
					t.Errorf("a latch recorded an acquisition as %q", kind.AsString())
				}
				if !slices.Contains(recorded, kind.AsString()) {
					recorded = append(recorded, kind.AsString())
				}
			}
		}
	}
	documented := docKinds(t)
	slices.Sort(recorded)
	slices.Sort(documented)
	if !slices.Equal(recorded, documented) {
		t.Errorf("lock.kind recorded %v, the package doc lists %v", recorded, documented)
	}
}

// docKinds reads the values of lock.kind that doc.go lists in its
// parenthesis "lock.kind (a, b, ...; ...)".
func docKinds(t *testing.T) []string {
	t.Helper()
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(strings.ReplaceAll(string(src), "//", "")), " ")
	m := regexp.MustCompile(`lock\.kind \(([^);]*)`).FindStringSubmatch(text)
	if m == nil {
		t.Fatal("doc.go lists no lock.kind values")
	}
	var kinds []string
	for _, k := range strings.Split(m[1], ",") {
		k = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(k), "and "))
		kinds = append(kinds, strings.Fields(k)[0])
	}
	return kinds
}
