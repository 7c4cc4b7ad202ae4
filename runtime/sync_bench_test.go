package runtime_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockgen/lockgen/runtime"
)

// go test -run '^$' -bench 'Semaphore|Latch' -benchmem ./runtime

// BenchmarkSemaphoreUncontended is one permit taken and given back with
// no one else around: commands per op and allocations.
func BenchmarkSemaphoreUncontended(b *testing.B) {
	e, cc := setupCounted(b, nil)
	ctx := context.Background()
	sem := e.c.Semaphore("bench:sem", runtime.SemaphoreOptions{Permits: 8})
	fn := func(context.Context) error { return nil }
	_ = sem.Do(ctx, fn)
	b.ReportAllocs()
	cc.start()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := sem.Do(ctx, fn); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(cc.n.Load())/float64(b.N), "cmds/op")
}

// BenchmarkSemaphore32On8 runs 32 goroutines on a semaphore of 8 permits:
// acquisitions per second and the p99 wait for a permit.
func BenchmarkSemaphore32On8(b *testing.B) {
	_, _, c := setup(b, nil)
	ctx := context.Background()
	sem := c.Semaphore("bench:sem32", runtime.SemaphoreOptions{Permits: 8, WaitTime: runtime.Forever})
	var (
		left  atomic.Int64
		mu    sync.Mutex
		waits []time.Duration
		wg    sync.WaitGroup
	)
	left.Store(int64(b.N))
	b.ResetTimer()
	start := time.Now()
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for left.Add(-1) >= 0 {
				t0 := time.Now()
				h, err := sem.Acquire(ctx, 1)
				if err != nil {
					b.Error(err)
					return
				}
				mine = append(mine, time.Since(t0))
				if err := sem.Release(h); err != nil {
					b.Error(err)
					return
				}
			}
			mu.Lock()
			waits = append(waits, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	slices.Sort(waits)
	if len(waits) > 0 {
		b.ReportMetric(float64(waits[len(waits)*99/100].Microseconds()), "p99-wait-µs")
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "acq/s")
}

// BenchmarkLatchRelease16 arms a latch, lets 16 waiters block on it, and
// counts it down: the time from the CountDown call to each waiter's
// return (p50 and p99 over every waiter of every op).
func BenchmarkLatchRelease16(b *testing.B) {
	_, _, c := setup(b, nil)
	ctx := context.Background()
	l := c.Latch("bench:latch", runtime.LatchOptions{Count: 1})
	var lags []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		if _, err := l.Arm(ctx); err != nil {
			b.Fatal(err)
		}
		var ready, done sync.WaitGroup
		returned := make([]time.Time, 16)
		for w := 0; w < 16; w++ {
			ready.Add(1)
			done.Add(1)
			go func() {
				defer done.Done()
				ready.Done()
				if err := l.Await(ctx); err != nil {
					b.Error(err)
				}
				returned[w] = time.Now()
			}()
		}
		ready.Wait()
		time.Sleep(20 * time.Millisecond) // let them block
		b.StartTimer()
		sent := time.Now()
		if err := l.CountDown(ctx); err != nil {
			b.Fatal(err)
		}
		done.Wait()
		for _, at := range returned {
			lags = append(lags, at.Sub(sent))
		}
	}
	b.StopTimer()
	slices.Sort(lags)
	b.ReportMetric(float64(lags[len(lags)/2].Microseconds()), "p50-release-µs")
	b.ReportMetric(float64(lags[len(lags)*99/100].Microseconds()), "p99-release-µs")
}

// BenchmarkFencedUncontended is a fenced lock taken and released with no
// one else around: still 2 commands per op (the token INCR is in the
// acquire script).
func BenchmarkFencedUncontended(b *testing.B) {
	e, cc := setupCounted(b, nil)
	ctx := context.Background()
	f := e.c.FencedLock("bench:fenced", runtime.LockOptions{})
	fn := func(context.Context, int64) error { return nil }
	_ = f.DoFenced(ctx, fn)
	b.ReportAllocs()
	cc.start()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := f.DoFenced(ctx, fn); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(cc.n.Load())/float64(b.N), "cmds/op")
}
