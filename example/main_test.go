package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/example/gen"
	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/runtime"
)

func TestDemoOnEmbeddedRedisFindsNoViolations(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out, "", nil, 4, 300*time.Millisecond); err != nil && !starved(err, out.String()) {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{"violations found: 0", "checkout (multi: order + inventory) ", "RedLock nodes:    3 embedded"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("summary lacks %q:\n%s", want, out.String())
		}
	}
}

func TestDemoOnRealRedisFindsNoViolations(t *testing.T) {
	s := redistest.Start(t)
	var red []string
	for _, n := range redistest.StartN(t, 3) {
		red = append(red, "redis://"+n.Addr())
	}
	// The workers draw their locks at random, a payment (the RedLock) one
	// time in twelve: on a loaded machine under -race a short run may draw
	// none. The demo runs again until one was drawn; each run must find
	// no violation, and the payments must have been locked on the nodes.
	var out bytes.Buffer
	obs := newLatencies()
	for round := 0; len(obs.missing([]string{"PaymentLock"})) > 0; round++ {
		if round == 20 {
			t.Fatalf("%d runs of the demo never drew a payment:\n%s", round, out.String())
		}
		out.Reset()
		if err := runObserved(&out, "redis://"+s.Addr(), red, 4, 300*time.Millisecond, obs); err != nil && !starved(err, out.String()) {
			t.Fatalf("%v\n%s", err, out.String())
		}
	}
	if strings.Contains(out.String(), "payment (red) 0\n") {
		t.Fatalf("no payment was locked on the RedLock nodes:\n%s", out.String())
	}
}

// starved reports whether the demo's error is its count of lock calls
// that failed, the first of them one that could not reach Redis within
// its bound (runtime.ErrUnavailable), in a run that found no violation: on a 2-core box under -race, at the start
// of go test ./... (compiling, and the generator's tests beside), an
// InventoryLock call (wait time 1 s) once had no reply from the embedded
// server within its wait. What these tests check is the summary and
// mutual exclusion, not the machine's speed; any other error fails them.
func starved(err error, out string) bool {
	return errors.Is(err, runtime.ErrUnavailable) && strings.HasSuffix(strings.TrimSpace(out), "violations found: 0")
}

// Each generated helper is benchmarked against the runtime call it wraps
// (same key, same options) on a real redis-server: run with -benchmem; the
// allocations of a pair should match.

// BenchmarkWithOrderLock and BenchmarkMutexDo: a reentrant lock.
func BenchmarkWithOrderLock(b *testing.B) {
	locks, _ := benchClient(b)
	benchLoop(b, func(ctx context.Context, i int) error {
		return locks.WithOrderLock(ctx, int64(i), nop)
	})
}

func BenchmarkMutexDo(b *testing.B) {
	_, c := benchClient(b)
	benchLoop(b, func(ctx context.Context, i int) error {
		// The key is built the way the generated code builds it.
		return c.Mutex("order:"+itoa(int64(i)), orderOpts).Do(ctx, nop)
	})
}

// BenchmarkWithInventoryLock and BenchmarkFairLockDo: a fair lock.
func BenchmarkWithInventoryLock(b *testing.B) {
	locks, _ := benchClient(b)
	benchLoop(b, func(ctx context.Context, i int) error {
		return locks.WithInventoryLock(ctx, 1, ids[i], nop)
	})
}

func BenchmarkFairLockDo(b *testing.B) {
	_, c := benchClient(b)
	benchLoop(b, func(ctx context.Context, i int) error {
		return c.FairLock("inventory:"+itoa(1)+":"+ids[i], inventoryOpts).Do(ctx, nop)
	})
}

// BenchmarkWithCatalogRead, BenchmarkWithCatalogWrite, BenchmarkRWLockReadDo
// and BenchmarkRWLockWriteDo: both sides of a read-write lock.
func BenchmarkWithCatalogRead(b *testing.B) {
	locks, _ := benchClient(b)
	benchLoop(b, func(ctx context.Context, i int) error {
		return locks.WithCatalogRead(ctx, ids[i], nop)
	})
}

func BenchmarkRWLockReadDo(b *testing.B) {
	_, c := benchClient(b)
	benchLoop(b, func(ctx context.Context, i int) error {
		return c.ReadWrite("catalog:"+ids[i], catalogOpts).Read().Do(ctx, nop)
	})
}

func BenchmarkWithCatalogWrite(b *testing.B) {
	locks, _ := benchClient(b)
	benchLoop(b, func(ctx context.Context, i int) error {
		return locks.WithCatalogWrite(ctx, ids[i], nop)
	})
}

func BenchmarkRWLockWriteDo(b *testing.B) {
	_, c := benchClient(b)
	benchLoop(b, func(ctx context.Context, i int) error {
		return c.ReadWrite("catalog:"+ids[i], catalogOpts).Write().Do(ctx, nop)
	})
}

// BenchmarkWithCheckoutLock and BenchmarkMultiLockDo: a multi-lock over a
// reentrant and a fair member, built from the members' handles.
func BenchmarkWithCheckoutLock(b *testing.B) {
	locks, _ := benchClient(b)
	benchLoop(b, func(ctx context.Context, i int) error {
		return locks.WithCheckoutLock(ctx, int64(i), 1, ids[i], nop)
	})
}

func BenchmarkMultiLockDo(b *testing.B) {
	_, c := benchClient(b)
	benchLoop(b, func(ctx context.Context, i int) error {
		return c.MultiLock(checkoutOpts,
			c.Mutex("order:"+itoa(int64(i)), orderOpts),
			c.FairLock("inventory:"+itoa(1)+":"+ids[i], inventoryOpts),
		).Do(ctx, nop)
	})
}

// BenchmarkWithPaymentLock and BenchmarkRedLockDo: a RedLock over three
// redis-server nodes.
func BenchmarkWithPaymentLock(b *testing.B) {
	locks, _ := redBenchClient(b)
	benchLoop(b, func(ctx context.Context, i int) error {
		return locks.WithPaymentLock(ctx, ids[i], nop)
	})
}

func BenchmarkRedLockDo(b *testing.B) {
	_, c := redBenchClient(b)
	opts := runtime.LockOptions{Name: "PaymentLock", Lease: 30 * time.Second, WaitTime: runtime.Forever}
	benchLoop(b, func(ctx context.Context, i int) error {
		return c.RedLock("payment:"+ids[i], opts).Do(ctx, nop)
	})
}

// The options of locks.yaml, as the generated code has them.
var (
	orderOpts     = runtime.LockOptions{Name: "OrderLock", Lease: runtime.Watchdog, WaitTime: 3 * time.Second}
	inventoryOpts = runtime.LockOptions{Name: "InventoryLock", Lease: 2 * time.Second, WaitTime: time.Second, QueueTimeout: time.Minute}
	checkoutOpts  = runtime.LockOptions{Name: "CheckoutLock", Lease: runtime.Watchdog, WaitTime: 10 * time.Second}
)

var catalogOpts = runtime.LockOptions{Name: "Catalog", Lease: runtime.Watchdog, WaitTime: 2 * time.Second, WritersFirst: true}

// ids are string key params made once, so that building them is not
// counted in the benchmarks.
var ids = func() []string {
	s := make([]string, 1024)
	for i := range s {
		s[i] = "id-" + itoa(int64(i))
	}
	return s
}()

func nop(context.Context) error { return nil }

// benchLoop calls do with a key index in [0, 1024) until the benchmark is done.
func benchLoop(b *testing.B, do func(ctx context.Context, i int) error) {
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if err := do(ctx, i&1023); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOrderLockHandle and BenchmarkMutexHandle isolate what the
// generated code adds: building the key and the handle, no Redis.
func BenchmarkOrderLockHandle(b *testing.B) {
	locks, _ := handleClient(b)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		sink = locks.OrderLock(int64(i & 1023))
	}
}

func BenchmarkMutexHandle(b *testing.B) {
	_, c := handleClient(b)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		sink = c.Mutex("order:"+itoa(int64(i&1023)), orderOpts)
	}
}

func BenchmarkCheckoutLockHandle(b *testing.B) {
	locks, _ := handleClient(b)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		multiSink = locks.CheckoutLock(int64(i&1023), 1, ids[i&1023])
	}
}

func BenchmarkMultiLockHandle(b *testing.B) {
	_, c := handleClient(b)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		multiSink = c.MultiLock(checkoutOpts,
			c.Mutex("order:"+itoa(int64(i&1023)), orderOpts),
			c.FairLock("inventory:"+itoa(1)+":"+ids[i&1023], inventoryOpts),
		)
	}
}

var (
	sink      *runtime.Mutex
	multiSink *runtime.MultiLock
)

func handleClient(b *testing.B) (*gen.Locks, *runtime.Client) {
	mr := miniredis.RunT(b)
	return clientFor(b, redis.NewClient(&redis.Options{Addr: mr.Addr()}), nil)
}

func benchClient(b *testing.B) (*gen.Locks, *runtime.Client) {
	return clientFor(b, redistest.Start(b).Client(b), nil)
}

// redBenchClient is a client whose RedLock nodes are three more servers.
func redBenchClient(b *testing.B) (*gen.Locks, *runtime.Client) {
	var nodes []redis.UniversalClient
	for _, s := range redistest.StartN(b, 3) {
		nodes = append(nodes, s.Client(b))
	}
	return clientFor(b, redistest.Start(b).Client(b), &runtime.Options{RedLockNodes: nodes})
}

func clientFor(b *testing.B, rdb *redis.Client, opts *runtime.Options) (*gen.Locks, *runtime.Client) {
	b.Cleanup(func() { rdb.Close() })
	c, err := runtime.NewClient(rdb, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return gen.New(c), c
}
