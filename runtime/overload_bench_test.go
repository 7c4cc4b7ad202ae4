package runtime_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/runtime"
)

// BenchmarkWatchdogOverload is issue #25's overload scenario: one Client
// holds many watchdog locks while goroutines keep taking (and releasing)
// new ones, on a box whose CPU the Client shares with redis-server. Held
// locks come before new ones: no hold may be lost, and acquisitions go
// on at whatever rate is left.
//
// It takes the holds (64 goroutines, one try each), measures the
// steady-state renewal cost over three periods with nothing else
// running, then runs the acquirers for a fixed time. It reports:
//
//   - lost: holds whose ctx ended, from the first acquisition to the end;
//   - lost-releasing: holds lost while all of them are released at the
//     end, from 64 goroutines (a release flood: the holds not yet
//     released are still renewed);
//   - acq/s: acquisitions (TryLock + Unlock of a fresh lock) per second
//     over the run, and acq/s-last-half over its second half, the rate
//     it settles at;
//   - gate-closed-%: the share of the run the admission gate held fresh
//     acquisitions back (sampled every 10ms);
//   - client-µs/hold/period, redis-µs/hold/period: the renewal cost in
//     the quiet phase, the process's CPU time and Redis' (INFO cpu,
//     used_cpu_sys + used_cpu_user) per renewal confirmed.
//
// The size is set from the environment; large runs saturate the box:
//
//	LOCKGEN_OVERLOAD_HOLDS=300000 LOCKGEN_OVERLOAD_FOR=40s \
//	  go test -run '^$' -bench WatchdogOverload -benchtime 1x -timeout 30m ./runtime
//
// Defaults: 20,000 holds, WatchdogTimeout 3s (LOCKGEN_OVERLOAD_WD), a
// quiet phase of 3 periods (LOCKGEN_OVERLOAD_QUIET, its CPU profile written
// to LOCKGEN_OVERLOAD_PROFILE if set), 32
// acquirers (LOCKGEN_OVERLOAD_ACQUIRERS, 0: none) for 10s, each waiting
// at most 1s (LOCKGEN_OVERLOAD_WAIT) for a lock.
func BenchmarkWatchdogOverload(b *testing.B) {
	n := envInt("LOCKGEN_OVERLOAD_HOLDS", 20000)
	wd := envDuration(b, "LOCKGEN_OVERLOAD_WD", 3*time.Second)
	run := envDuration(b, "LOCKGEN_OVERLOAD_FOR", 10*time.Second)
	wait := envDuration(b, "LOCKGEN_OVERLOAD_WAIT", time.Second)
	acquirers := envInt("LOCKGEN_OVERLOAD_ACQUIRERS", 32)
	var renewed, lostEvents atomic.Int64
	obs := runtime.ObserverFunc(func(e runtime.Event) {
		switch e.Kind {
		case runtime.EventRenewed:
			renewed.Add(int64(e.Renewed))
		case runtime.EventLost:
			lostEvents.Add(1)
		}
	})
	s := redistest.Start(b, redistest.Arg("--maxmemory", "0"))
	rdb := s.Client(b)
	opts := &runtime.Options{WatchdogTimeout: wd, Observer: obs}
	trace := os.Getenv("LOCKGEN_OVERLOAD_TRACE") != ""
	if trace {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	c := newClient(b, rdb, opts)
	for b.Loop() {
		hs := takeHolds(b, c, n)
		if trace {
			defer traceHolds(b, hs, &renewed)()
		}
		// The quiet phase: renewals only.
		renewed.Store(0)
		cpu0, rcpu0 := cpuTime(), redistest.CPU(b, rdb)
		periods := envInt("LOCKGEN_OVERLOAD_QUIET", 3)
		stopProfile := profileCPU(b, os.Getenv("LOCKGEN_OVERLOAD_PROFILE"))
		time.Sleep(time.Duration(periods) * wd / 3)
		stopProfile()
		cpu, rcpu := cpuTime()-cpu0, redistest.CPU(b, rdb)-rcpu0
		if r := renewed.Load(); r > 0 {
			b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(r), "client-µs/hold/period")
			b.ReportMetric(float64(rcpu.Nanoseconds())/1e3/float64(r), "redis-µs/hold/period")
		}
		stop := sampleGate(c)
		total, lastHalf := acquireFor(b, c, acquirers, run, wait)
		closed := stop()
		b.ReportMetric(100*closed, "gate-closed-%")
		b.ReportMetric(float64(total)/run.Seconds(), "acq/s")
		b.ReportMetric(float64(lastHalf)/(run/2).Seconds(), "acq/s-last-half")
		b.ReportMetric(float64(hs.lost()), "lost")
		b.Logf("%d holds at %v, %d acquirers for %v: %d lost, %d acquisitions (%d in the second half), gate closed %.0f%% of the time",
			n, wd, acquirers, run, hs.lost(), total, lastHalf, 100*closed)
		// The release flood: every hold released at once, from 64
		// goroutines. The holds not yet released must not be lost.
		lostEvents.Store(0)
		start := time.Now()
		failed := hs.release()
		b.ReportMetric(float64(lostEvents.Load()), "lost-releasing")
		b.Logf("%d holds released in %v, %d of them lost before their release, %d releases failed",
			n, time.Since(start).Round(time.Millisecond), lostEvents.Load(), failed)
	}
}

// profileCPU writes a CPU profile to path (none if empty) until the
// returned func is called: LOCKGEN_OVERLOAD_PROFILE profiles the quiet
// phase alone, renewals and nothing else.
func profileCPU(b *testing.B, path string) (stop func()) {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Error(err)
		}
	}
}

// traceHolds logs, every second until the returned func is called, how
// many of hs are lost and how many renewals were confirmed since the last
// line (LOCKGEN_OVERLOAD_TRACE, with the Client's warnings).
func traceHolds(b *testing.B, hs *heldLocks, renewed *atomic.Int64) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		var last int64
		for {
			select {
			case <-done:
				return
			case <-t.C:
				r := renewed.Load()
				fmt.Fprintf(os.Stderr, "%s lost=%d renewed=%d\n", time.Now().Format("15:04:05"), hs.lost(), r-last)
				last = r
			}
		}
	}()
	return func() { close(done) }
}

// heldLocks are the holds a benchmark keeps.
type heldLocks struct {
	mutexes []*runtime.Mutex
	ctxs    []context.Context
}

// takeHolds takes n watchdog locks with 64 goroutines.
func takeHolds(b *testing.B, c *runtime.Client, n int) *heldLocks {
	hs := &heldLocks{mutexes: make([]*runtime.Mutex, n), ctxs: make([]context.Context, n)}
	start := time.Now()
	parallel(64, n, func(i int) {
		m := c.Mutex("overload:held:"+strconv.Itoa(i), runtime.LockOptions{})
		h, err := m.TryLock(context.Background(), 0, runtime.Watchdog)
		if err != nil {
			b.Error(err)
			return
		}
		hs.mutexes[i], hs.ctxs[i] = m, h
	})
	b.Logf("%d holds taken in %v", n, time.Since(start).Round(time.Millisecond))
	return hs
}

// lost counts the holds not taken or whose ctx ended.
func (hs *heldLocks) lost() int {
	lost := 0
	for _, h := range hs.ctxs {
		if h == nil || h.Err() != nil {
			lost++
		}
	}
	return lost
}

// release releases every hold from 64 goroutines and returns how many
// releases failed.
func (hs *heldLocks) release() (failed int64) {
	var n atomic.Int64
	parallel(64, len(hs.ctxs), func(i int) {
		if hs.ctxs[i] != nil && hs.mutexes[i].Unlock(hs.ctxs[i]) != nil {
			n.Add(1)
		}
	})
	return n.Load()
}

// acquireFor has k goroutines take and release fresh locks for d, each
// waiting at most wait, and returns how many they took, in all and in
// the second half of d.
func acquireFor(b *testing.B, c *runtime.Client, k int, d, wait time.Duration) (total, lastHalf int64) {
	var n, half atomic.Int64
	var second atomic.Bool
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	halfway := time.AfterFunc(d/2, func() { second.Store(true) })
	defer halfway.Stop()
	var seq atomic.Int64
	var wg sync.WaitGroup
	for range k {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				m := c.Mutex("overload:new:"+strconv.FormatInt(seq.Add(1), 10), runtime.LockOptions{})
				h, err := m.TryLock(ctx, wait, runtime.Watchdog)
				if err != nil {
					continue // the run ended, or the wait did
				}
				if err := m.Unlock(h); err != nil && ctx.Err() == nil {
					b.Error(err)
				}
				n.Add(1)
				if second.Load() {
					half.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return n.Load(), half.Load()
}

// sampleGate samples c's admission gate every 10ms until the returned
// func is called, which returns the share of samples it was closed.
func sampleGate(c *runtime.Client) (stop func() float64) {
	done := make(chan struct{})
	res := make(chan float64)
	go func() {
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		n, closed := 0, 0
		for {
			select {
			case <-done:
				res <- float64(closed) / float64(max(n, 1))
				return
			case <-t.C:
				n++
				if runtime.AdmissionClosed(c) {
					closed++
				}
			}
		}
	}()
	return func() float64 { close(done); return <-res }
}

// parallel runs f(0..n-1) on k goroutines.
func parallel(k, n int, f func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range k {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				f(i)
			}
		}()
	}
	wg.Wait()
}

func envDuration(b *testing.B, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		b.Fatalf("%s: %v", name, err)
	}
	return d
}
