package runtime_test

import (
	"context"
	"fmt"
	rtm "runtime/metrics"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockgen/lockgen/runtime"
)

// BenchmarkMutexWaitByKeys runs 2 goroutines per key on 1 to 1,000 keys of
// one Client and reports the time goroutines spent blocked on Go mutexes
// per acquisition (runtime/metrics /sync/mutex/wait/total): the cost of
// the Client's shared tables. Unrelated locks should not contend, so it
// should grow little with the number of keys.
func BenchmarkMutexWaitByKeys(b *testing.B) {
	for _, keys := range []int{1, 10, 100, 1000} {
		b.Run(fmt.Sprintf("keys=%d", keys), func(b *testing.B) {
			_, _, c := setup(b, nil)
			ctx := context.Background()
			fn := func(context.Context) error { return nil }
			mutexes := make([]*runtime.Mutex, keys)
			for i := range mutexes {
				mutexes[i] = c.Mutex("bench:keys:"+strconv.Itoa(i), runtime.LockOptions{WaitTime: runtime.Forever})
			}
			var left atomic.Int64
			left.Store(int64(b.N))
			sample := []rtm.Sample{{Name: "/sync/mutex/wait/total:seconds"}}
			rtm.Read(sample)
			wait0 := sample[0].Value.Float64()
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for g := range 2 * keys {
				wg.Add(1)
				go func() {
					defer wg.Done()
					m := mutexes[g%keys]
					for left.Add(-1) >= 0 {
						if err := m.Do(ctx, fn); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			rtm.Read(sample)
			wait := sample[0].Value.Float64() - wait0
			b.ReportMetric(wait*1e9/float64(b.N), "mutex-wait-ns/acq")
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "acq/s")
		})
	}
}

// BenchmarkEightKeys runs 8 goroutines, each on a key of its own, through
// one Client: no lock contention in Redis, so what it measures is the
// Client's own shared state.
func BenchmarkEightKeys(b *testing.B) {
	_, _, c := setup(b, nil)
	ctx := context.Background()
	fn := func(context.Context) error { return nil }
	var left atomic.Int64
	left.Store(int64(b.N))
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := c.Mutex("bench:eight:"+strconv.Itoa(g), runtime.LockOptions{})
			for left.Add(-1) >= 0 {
				if err := m.Do(ctx, fn); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "acq/s")
}
