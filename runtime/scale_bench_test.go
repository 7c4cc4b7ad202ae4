package runtime_test

import (
	"context"
	"os"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/runtime"
)

// BenchmarkWatchdogScale holds many watchdog locks in one Client for three
// renewal periods after the last was taken, and reports how many were
// lost (must be 0), the renewal calls per period and the client CPU per
// period. The size is set from the environment, since a million holds is
// a manual run (a few GiB of memory, minutes):
//
//	LOCKGEN_SCALE_HOLDS=1000000 LOCKGEN_SCALE_WD=30s \
//	  go test -run '^$' -bench WatchdogScale -benchtime 1x -timeout 30m ./runtime
//
// Defaults: 20,000 holds, WatchdogTimeout 3s.
func BenchmarkWatchdogScale(b *testing.B) {
	holds := envInt("LOCKGEN_SCALE_HOLDS", 20000)
	wd := 3 * time.Second
	if v := os.Getenv("LOCKGEN_SCALE_WD"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatal(err)
		}
		wd = d
	}
	var calls, renewed, lostN atomic.Int64
	obs := runtime.ObserverFunc(func(e runtime.Event) {
		switch e.Kind {
		case runtime.EventRenewed:
			calls.Add(int64(e.Calls))
			renewed.Add(int64(e.Renewed))
		case runtime.EventLost:
			lostN.Add(1)
		}
	})
	s := redistest.Start(b, redistest.Arg("--maxmemory", "0"))
	rdb := s.Client(b)
	c := newClient(b, rdb, &runtime.Options{WatchdogTimeout: wd, Observer: obs})
	ctx := context.Background()
	ctxs := make([]context.Context, holds)
	mutexes := make([]*runtime.Mutex, holds)
	for b.Loop() {
		start := time.Now()
		var next atomic.Int64
		var wg sync.WaitGroup
		for range 64 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := int(next.Add(1)) - 1; i < holds; i = int(next.Add(1)) - 1 {
					m := c.Mutex("scale:"+strconv.Itoa(i), runtime.LockOptions{})
					h, err := m.TryLock(ctx, 0, runtime.Watchdog)
					if err != nil {
						b.Error(err)
						return
					}
					mutexes[i], ctxs[i] = m, h
				}
			}()
		}
		wg.Wait()
		b.Logf("%d holds taken in %v", holds, time.Since(start).Round(time.Millisecond))
		debug.FreeOSMemory()
		calls.Store(0)
		renewed.Store(0)
		cpu0 := cpuTime()
		const periods = 3
		time.Sleep(periods * wd / 3)
		cpu := cpuTime() - cpu0
		lost := 0
		for _, h := range ctxs {
			if h == nil || h.Err() != nil {
				lost++
			}
		}
		b.ReportMetric(float64(lost), "lost")
		b.ReportMetric(float64(lostN.Load()), "lost-events")
		b.ReportMetric(float64(calls.Load())/periods, "calls/period")
		b.ReportMetric(float64(renewed.Load())/periods, "renewed/period")
		b.ReportMetric(float64(cpu.Milliseconds())/periods, "cpu-ms/period")
		var wg2 sync.WaitGroup
		var at atomic.Int64
		for range 64 {
			wg2.Add(1)
			go func() {
				defer wg2.Done()
				for i := int(at.Add(1)) - 1; i < holds; i = int(at.Add(1)) - 1 {
					if ctxs[i] != nil {
						_ = mutexes[i].Unlock(ctxs[i])
					}
				}
			}()
		}
		wg2.Wait()
	}
}

func envInt(name string, def int) int {
	if v := os.Getenv(name); v != "" {
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
	}
	return def
}
