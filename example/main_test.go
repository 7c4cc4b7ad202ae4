package main

import (
	"bytes"
	"context"
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
	if err := run(&out, "", 4, 300*time.Millisecond); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "violations found: 0") {
		t.Fatalf("summary lacks the violation count:\n%s", out.String())
	}
}

func TestDemoOnRealRedisFindsNoViolations(t *testing.T) {
	s := redistest.Start(t)
	var out bytes.Buffer
	if err := run(&out, "redis://"+s.Addr(), 4, 300*time.Millisecond); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
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
	opts := runtime.LockOptions{Name: "OrderLock", Lease: runtime.Watchdog, WaitTime: 3 * time.Second}
	benchLoop(b, func(ctx context.Context, i int) error {
		// The key is built the way the generated code builds it.
		return c.Mutex("order:"+itoa(int64(i)), opts).Do(ctx, nop)
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
	opts := runtime.LockOptions{Name: "InventoryLock", Lease: 2 * time.Second, WaitTime: time.Second, QueueTimeout: time.Minute}
	benchLoop(b, func(ctx context.Context, i int) error {
		return c.FairLock("inventory:"+itoa(1)+":"+ids[i], opts).Do(ctx, nop)
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
	opts := runtime.LockOptions{Name: "OrderLock", Lease: runtime.Watchdog, WaitTime: 3 * time.Second}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		sink = c.Mutex("order:"+itoa(int64(i&1023)), opts)
	}
}

var sink *runtime.Mutex

func handleClient(b *testing.B) (*gen.Locks, *runtime.Client) {
	mr := miniredis.RunT(b)
	return clientFor(b, redis.NewClient(&redis.Options{Addr: mr.Addr()}))
}

func benchClient(b *testing.B) (*gen.Locks, *runtime.Client) {
	return clientFor(b, redistest.Start(b).Client(b))
}

func clientFor(b *testing.B, rdb *redis.Client) (*gen.Locks, *runtime.Client) {
	b.Cleanup(func() { rdb.Close() })
	c, err := runtime.NewClient(rdb, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return gen.New(c), c
}
