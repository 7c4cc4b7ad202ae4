package runtime_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/runtime"
)

// go test -run '^$' -bench . -benchmem ./runtime

// BenchmarkMutexUncontended is one Do on a free lock, through a go-redis
// client with default options (its calls with a deadline run aside:
// scripts.Abandoned) and through one that honours deadlines on its reads
// (ContextTimeoutEnabled: every call inline).
func BenchmarkMutexUncontended(b *testing.B) {
	for _, timeouts := range []bool{false, true} {
		name := "default-options"
		if timeouts {
			name = "context-timeout"
		}
		b.Run(name, func(b *testing.B) {
			s := redistest.Start(b)
			rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), ContextTimeoutEnabled: timeouts})
			b.Cleanup(func() { _ = rdb.Close() })
			c := newClient(b, rdb, nil)
			ctx := context.Background()
			m := c.Mutex("bench:uncontended", runtime.LockOptions{})
			fn := func(context.Context) error { return nil }
			_ = m.Do(ctx, fn)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := m.Do(ctx, fn); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkHandoff8 runs 8 goroutines on one key and reports the
// hand-off: time from one holder's release to the next holder's acquire.
func BenchmarkHandoff8(b *testing.B) {
	for _, k := range []lockKind{exclusiveKinds[0], exclusiveKinds[1]} {
		b.Run(k.name, func(b *testing.B) { benchHandoff(b, k) })
	}
}

func benchHandoff(b *testing.B, k lockKind) {
	_, _, c := setup(b, nil)
	ctx := context.Background()
	m := k.new(c, "bench:handoff", runtime.LockOptions{WaitTime: runtime.Forever})
	var (
		mu       sync.Mutex
		released time.Time
		gaps     []time.Duration
		left     atomic.Int64
	)
	left.Store(int64(b.N))
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for left.Add(-1) >= 0 {
				h, err := m.Lock(ctx)
				if err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				if !released.IsZero() {
					gaps = append(gaps, time.Since(released))
				}
				mu.Unlock()
				time.Sleep(200 * time.Microsecond) // hold
				mu.Lock()
				released = time.Now()
				mu.Unlock()
				_ = m.Unlock(h)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	slices.Sort(gaps)
	if len(gaps) > 0 {
		b.ReportMetric(float64(gaps[len(gaps)/2].Microseconds()), "p50-handoff-µs")
		b.ReportMetric(float64(gaps[len(gaps)*99/100].Microseconds()), "p99-handoff-µs")
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "acq/s")
}

// BenchmarkThroughput8 runs 8 goroutines taking one lock with a 1ms hold:
// the read side of a read-write lock (readers share) against the mutex.
func BenchmarkThroughput8(b *testing.B) {
	for _, k := range []lockKind{exclusiveKinds[0], readKind} {
		b.Run(k.name, func(b *testing.B) {
			_, _, c := setup(b, nil)
			ctx := context.Background()
			m := k.new(c, "bench:throughput", runtime.LockOptions{WaitTime: runtime.Forever})
			var left atomic.Int64
			left.Store(int64(b.N))
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for w := 0; w < 8; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for left.Add(-1) >= 0 {
						if err := m.Do(ctx, func(context.Context) error { time.Sleep(time.Millisecond); return nil }); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "acq/s")
		})
	}
}

// BenchmarkWatchdog10k holds 10,000 watchdog locks in one Client and
// reports the renewal script calls per watchdog period and the client CPU
// time per period.
func BenchmarkWatchdog10k(b *testing.B) {
	const holds = 10000
	const timeout = 900 * time.Millisecond
	var calls, renewed atomic.Int64
	obs := runtime.ObserverFunc(func(e runtime.Event) {
		if e.Kind == runtime.EventRenewed {
			calls.Add(int64(e.Calls))
			renewed.Add(int64(e.Renewed))
		}
	})
	_, _, c := setup(b, &runtime.Options{WatchdogTimeout: timeout, Observer: obs})
	ctx := context.Background()
	ctxs := make([]context.Context, holds)
	mutexes := make([]*runtime.Mutex, holds)
	for i := range ctxs {
		mutexes[i] = c.Mutex("bench:wd:"+strconv.Itoa(i), runtime.LockOptions{})
		h, err := mutexes[i].Lock(ctx)
		if err != nil {
			b.Fatal(err)
		}
		ctxs[i] = h
	}
	b.ResetTimer()
	calls.Store(0)
	renewed.Store(0)
	cpu0 := cpuTime()
	periods := 3 * b.N
	time.Sleep(time.Duration(periods) * timeout / 3)
	cpu := cpuTime() - cpu0
	b.StopTimer()
	lost := 0
	for _, h := range ctxs {
		if h.Err() != nil {
			lost++
		}
	}
	b.ReportMetric(float64(calls.Load())/float64(periods), "calls/period")
	b.ReportMetric(float64(renewed.Load())/float64(periods), "renewed/period")
	b.ReportMetric(float64(cpu.Microseconds())/float64(periods), "cpu-µs/period")
	b.ReportMetric(float64(lost), "lost")
	for i, h := range ctxs {
		_ = mutexes[i].Unlock(h)
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkUncontendedOnCluster is BenchmarkMutexUncontended through a
// ClusterClient on a local 3+3 cluster: same 2 round trips, plus routing.
func BenchmarkUncontendedOnCluster(b *testing.B) {
	cl := redistest.StartCluster(b)
	var cc commandCounter
	rdb := cl.Client(b)
	rdb.AddHook(&cc)
	c := newClient(b, rdb, nil)
	ctx := context.Background()
	m := c.Mutex("bench:{cluster}", runtime.LockOptions{})
	fn := func(context.Context) error { return nil }
	_ = m.Do(ctx, fn)
	cc.start()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := m.Do(ctx, fn); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cc.n.Load())/float64(b.N), "cmds/op")
}

// BenchmarkRedLockAcquire measures RedLock acquisition over 5 nodes
// against a single-node mutex: p50/p99 of acquire alone.
func BenchmarkRedLockAcquire(b *testing.B) {
	servers := redistest.StartN(b, 5)
	var nodes []redis.UniversalClient
	for _, s := range servers {
		nodes = append(nodes, s.Client(b))
	}
	c := newClient(b, nodes[0], &runtime.Options{RedLockNodes: nodes})
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		lock func() (func() error, error)
	}{
		{"single-node mutex", func() (func() error, error) {
			m := c.Mutex("bench:red", runtime.LockOptions{})
			h, err := m.Lock(ctx)
			return func() error { return m.Unlock(h) }, err
		}},
		{"redlock 5 nodes", func() (func() error, error) {
			l := c.RedLock("bench:red", runtime.LockOptions{})
			h, err := l.Lock(ctx)
			return func() error { return l.Unlock(h) }, err
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			for i := 0; i < b.N; i++ {
				start := time.Now()
				unlock, err := tc.lock()
				lat = append(lat, time.Since(start))
				if err != nil {
					b.Fatal(err)
				}
				_ = unlock()
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-acquire-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-acquire-µs")
		})
	}
}
