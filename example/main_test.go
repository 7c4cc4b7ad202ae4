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

// BenchmarkWithOrderLock and BenchmarkMutexDo compare the generated
// helper with the runtime call it wraps (same key, same options) against
// a real redis-server: run with -benchmem; the allocations should match.
func BenchmarkWithOrderLock(b *testing.B) {
	locks, _ := benchClient(b)
	ctx := context.Background()
	fn := func(context.Context) error { return nil }
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if err := locks.WithOrderLock(ctx, int64(i&1023), fn); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMutexDo(b *testing.B) {
	_, c := benchClient(b)
	ctx := context.Background()
	fn := func(context.Context) error { return nil }
	opts := runtime.LockOptions{Name: "OrderLock", Lease: runtime.Watchdog, WaitTime: 3 * time.Second}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		// The key is built the way the generated code builds it.
		key := "order:" + itoa(int64(i&1023))
		if err := c.Mutex(key, opts).Do(ctx, fn); err != nil {
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
