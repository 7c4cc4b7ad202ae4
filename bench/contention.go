package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// shape is one workload: workers loop wait -> hold -> release -> think
// over keys lock keys (picked at random when keys > 1).
type shape struct {
	Workers int
	Keys    int
	Hold    time.Duration
	Think   time.Duration
	Dur     time.Duration
	// SpinHold busy-waits the hold instead of sleeping: an idle Go
	// scheduler rounds a 200 µs time.Sleep up to ~1 ms (the netpoller's
	// millisecond timeout), which would turn "hold 200 µs" into 1 ms. With
	// one key only one worker holds at a time, so spinning costs little.
	SpinHold bool
	// Procs > 1 spreads the workers over that many OS processes, one
	// client each (procs.go): no in-process shortcut helps a library there.
	Procs int
	// ReadShare is the share of acquisitions that are reads, for lockers
	// that have shared holds (rwLocker); the others take every one exclusively.
	ReadShare float64
	// PinKeys gives worker w the key w mod Keys for the whole window,
	// instead of a random key per acquisition: Workers/Keys goroutines
	// contend on each key (the cluster's many-keys shape).
	PinKeys bool
}

// keyState is the in-process truth about one lock key, shared by all
// workers of a run: who holds it (a second holder is a mutual-exclusion
// violation), how many wait for it, and when it was last released.
type keyState struct {
	holder  atomic.Int32
	waiting atomic.Int32
	// released is the release time (monoNow) of the last
	// release that happened while someone waited; 0 once consumed by the
	// next acquisition, which records the idle gap.
	released atomic.Int64
	_        [40]byte // keep hot keys on separate cache lines
}

// enter marks the key held: exclusively (holder 0 -> -1) or shared
// (holder n >= 0 -> n+1). It reports false on a mutual-exclusion violation.
func (k *keyState) enter(shared bool) bool {
	if !shared {
		return k.holder.CompareAndSwap(0, -1)
	}
	for {
		n := k.holder.Load()
		if n < 0 {
			return false
		}
		if k.holder.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (k *keyState) leave(shared bool) {
	if shared {
		k.holder.Add(-1)
	} else {
		k.holder.Store(0)
	}
}

// run is the result of one lib on one shape.
type run struct {
	Lib   *lib
	Shape shape

	Acqs       int64 // acquisitions that completed within the window
	AllAcqs    int64 // including those that completed while stopping
	Elapsed    time.Duration
	Wait       dist // per acquisition; unfinished waits at the stop are included
	Unfinished int  // waits cut off by the end of the window
	Gap        dist // release -> next acquisition, for releases with waiters
	Hold       time.Duration
	Fairness   float64 // fewest acquisitions of one worker / mean
	Violations int64
	Barged     int64 // hand-offs won by a worker that began waiting after the release started
	Handoffs   int64 // releases made while someone waited (= gap samples)
	Giveups    int64 // the library gave up waiting and the worker asked again
	Errors     int64
	Redis      cmdStats      // INFO commandstats delta (includes commands inside Lua)
	Client     cmdStats      // top-level commands the client sent
	Allocs     float64       // mallocs per acquisition (uncontended only)
	RedisCPU   time.Duration // INFO cpu used_cpu_user + used_cpu_sys delta around the row
	// ClientCPU is the user + sys CPU of the process(es) that ran the
	// row's workers, over the row's window (the harness's own work
	// included, alike in every row): the bench process for in-process
	// rows, the children's sum for a multi-process one.
	ClientCPU time.Duration
	Windows   []float64 // uncontended: ops/s of each round's window
	// Conns are the connections each process running the row's workers
	// held to each node at the end of the window (conns.go); counted on
	// the cluster only.
	Conns []connCount
}

// opsPerSec is an uncontended row's speed: the median of its windows, so
// that the few windows a scheduler hiccup halves or doubles do not decide
// a comparison (rate() for a single window).
func (r *run) opsPerSec() float64 {
	if len(r.Windows) == 0 {
		return r.rate()
	}
	w := slices.Sorted(slices.Values(r.Windows))
	return w[len(w)/2]
}

// windowSpread is the interquartile range of the windows' ops/s.
func (r *run) windowSpread() (lo, hi float64) {
	if len(r.Windows) == 0 {
		return r.rate(), r.rate()
	}
	w := slices.Sorted(slices.Values(r.Windows))
	return w[len(w)/4], w[(3*len(w))/4]
}

func (r *run) rate() float64 { return float64(r.Acqs) / r.Elapsed.Seconds() }

func (r *run) redisPerAcq() float64 {
	return float64(r.Redis.total()) / float64(max(r.AllAcqs, 1))
}

func (r *run) clientPerAcq() float64 {
	return float64(r.Client.total()) / float64(max(r.AllAcqs, 1))
}

// clientCPUPerAcq and redisCPUPerAcq are CPU µs per acquisition. They
// divide by every acquisition made, as the command counts do, since the
// CPU windows include the workers' stop.
func (r *run) clientCPUPerAcq() float64 { return perAcqMicros(r.ClientCPU, r.AllAcqs) }

func (r *run) redisCPUPerAcq() float64 { return perAcqMicros(r.RedisCPU, r.AllAcqs) }

// cpuPerAcq is client + Redis CPU µs per acquisition: what one
// acquisition cost the machine.
func (r *run) cpuPerAcq() float64 { return r.clientCPUPerAcq() + r.redisCPUPerAcq() }

func perAcqMicros(d time.Duration, acqs int64) float64 {
	return float64(d) / 1e3 / float64(max(acqs, 1))
}

// workerOut is what one worker saw; children of a multi-process run send
// theirs to the parent as JSON.
type workerOut struct {
	Waits      []time.Duration
	Gaps       []time.Duration
	Held       time.Duration
	Acqs, All  int64
	Unfinished int
	Errs, Viol int64
	Barged     int64
}

// contend runs l on s: every worker waits for a lock, holds it, releases
// it and thinks, until the window ends. With s.Procs > 1 the workers run
// in that many child processes (procs.go).
func (b *bench) contend(l *lib, s shape, prefix string) *run {
	if s.Procs > 1 {
		return b.contendProcs(l, s, prefix)
	}
	rdb, cnt := b.be.client()
	defer rdb.Close()
	var giveups atomic.Int64
	lk, closeLib := l.open(rdb, cnt, &giveups)
	defer closeLib()

	names := keyNames(prefix, s.Keys)
	warm(lk, names[0]+":warm")
	giveups.Store(0)
	keys := make([]keyState, s.Keys)
	before := b.measure(cnt.snapshot())
	cpu0 := processCPU()
	var conns []connCount
	outs := work(lk, s, names, keys, 0, s.Workers, monoNow()+int64(s.Dur), b.be.sampler(&conns))
	cpu := processCPU() - cpu0
	r := b.collect(l, s, outs, before, cnt.snapshot())
	r.Giveups, r.ClientCPU, r.Conns = giveups.Load(), cpu, conns
	return r
}

func keyNames(prefix string, n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("bench:%s:%d", prefix, i)
	}
	return names
}

// meter is the Redis-side state before a run: commandstats, Redis CPU, and
// the client-side command counts.
type meter struct {
	redis, client cmdStats
	cpu           time.Duration
}

func (b *bench) measure(client cmdStats) meter {
	ctx := context.Background()
	rs, err := b.be.commandStats(ctx)
	must(err)
	return meter{redis: rs, client: client, cpu: b.be.cpu(ctx)}
}

// work runs workers first..first+n-1 of s until the monotonic clock reaches
// end. keys is the truth table of the lock keys: a plain slice in-process,
// a shared mapping in a multi-process run (so that violations, idle gaps
// and barging are seen across processes). sample, if not nil, runs as the
// window ends, while the workers still run.
func work(lk locker, s shape, names []string, keys []keyState, first, n int, end int64, sample func()) []workerOut {
	outs := make([]workerOut, n)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seed := uint64(time.Now().UnixNano())
	var wg sync.WaitGroup
	for w := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := &outs[w]
			rng := rand.New(rand.NewPCG(uint64(first+w), seed))
			rwl, isRW := lk.(rwLocker)
			for ctx.Err() == nil {
				k := 0
				switch {
				case s.PinKeys:
					k = (first + w) % s.Keys
				case s.Keys > 1:
					k = rng.IntN(s.Keys)
				}
				st := &keys[k]
				st.waiting.Add(1)
				t0 := monoNow()
				read := isRW && s.ReadShare > 0 && rng.Float64() < s.ReadShare
				acquire := lk.acquire
				if read {
					acquire = rwl.acquireRead
				}
				release, err := acquire(ctx, names[k])
				t1 := monoNow()
				st.waiting.Add(-1)
				if err != nil {
					if ctx.Err() != nil {
						o.Waits = append(o.Waits, time.Duration(t1-t0))
						o.Unfinished++
						return
					}
					o.Errs++
					continue
				}
				entered := st.enter(read)
				if !entered {
					o.Viol++
				}
				if rel := st.released.Swap(0); rel > 0 {
					o.Gaps = append(o.Gaps, time.Duration(t1-rel))
					if t0 > rel {
						o.Barged++
					}
				}
				o.All++
				if t1 <= end {
					o.Acqs++
					o.Waits = append(o.Waits, time.Duration(t1-t0))
				}
				hold(s.Hold, s.SpinHold)
				t2 := monoNow()
				o.Held += time.Duration(t2 - t1)
				if st.waiting.Load() > 0 {
					st.released.Store(t2)
				} else {
					st.released.Store(0)
				}
				if entered {
					st.leave(read)
				}
				if err := release(); err != nil {
					o.Errs++
				}
				if s.Think > 0 {
					time.Sleep(s.Think)
				}
			}
		}()
	}
	time.Sleep(time.Duration(end - monoNow()))
	if sample != nil {
		sample()
	}
	cancel()
	wg.Wait()
	return outs
}

// collect turns the workers' outcomes and the Redis-side deltas into a run.
func (b *bench) collect(l *lib, s shape, outs []workerOut, before meter, client cmdStats) *run {
	r := &run{Lib: l, Shape: s, Elapsed: s.Dur}
	var waits, gaps []time.Duration
	var held time.Duration
	minAcq := int64(-1)
	for _, o := range outs {
		waits = append(waits, o.Waits...)
		gaps = append(gaps, o.Gaps...)
		held += o.Held
		r.Acqs += o.Acqs
		r.AllAcqs += o.All
		r.Unfinished += o.Unfinished
		r.Errors += o.Errs
		r.Violations += o.Viol
		r.Barged += o.Barged
		if minAcq < 0 || o.Acqs < minAcq {
			minAcq = o.Acqs
		}
	}
	if r.Acqs > 0 {
		r.Fairness = float64(minAcq) / (float64(r.Acqs) / float64(len(outs)))
		r.Hold = held / time.Duration(max(r.AllAcqs, 1))
	}
	r.Wait, r.Gap = newDist(waits), newDist(gaps)
	r.Handoffs = int64(len(gaps))
	after := b.measure(client)
	r.Redis = after.redis.sub(before.redis)
	r.Client = after.client.sub(before.client)
	r.RedisCPU = after.cpu - before.cpu
	return r
}

// uncontended: one goroutine, acquire + release on one key, back to back.
func (b *bench) uncontended(l *lib, dur time.Duration) *run {
	rdb, cnt := b.be.client()
	defer rdb.Close()
	var giveups atomic.Int64
	lk, closeLib := l.open(rdb, cnt, &giveups)
	defer closeLib()
	key := "bench:uncontended:" + l.Name
	warm(lk, key)

	ctx := context.Background()
	cBefore := cnt.snapshot()
	rBefore, err := b.be.commandStats(ctx)
	must(err)
	cpuBefore := b.be.cpu(ctx)
	runtime.GC()
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	var lat []time.Duration
	// An acquire still waiting a second after the window (a lost wake-up
	// on a free key: seen once with rueidislock) is given up and counted
	// as an error, rather than hanging the run.
	loop, cancel := context.WithTimeout(ctx, dur+time.Second)
	defer cancel()
	start := time.Now()
	n := int64(0)
	var errs int64
	for time.Since(start) < dur {
		t0 := time.Now()
		release, err := lk.acquire(loop, key)
		if err != nil {
			errs++
			continue
		}
		if err := release(); err != nil {
			errs++
		}
		lat = append(lat, time.Since(t0))
		n++
	}
	elapsed := time.Since(start)
	runtime.ReadMemStats(&ms1)
	rAfter, err := b.be.commandStats(ctx)
	must(err)
	rcpu := b.be.cpu(ctx) - cpuBefore
	var conns []connCount
	if sample := b.be.sampler(&conns); sample != nil {
		sample()
	}
	return &run{
		Lib: l, Shape: shape{Workers: 1, Keys: 1, Dur: dur},
		Acqs: n, AllAcqs: n, Elapsed: elapsed, Wait: newDist(lat), Errors: errs, Fairness: 1,
		Redis: rAfter.sub(rBefore), Client: cnt.snapshot().sub(cBefore),
		Allocs:   float64(ms1.Mallocs-ms0.Mallocs) / float64(max(n, 1)),
		RedisCPU: rcpu,
		Windows:  []float64{float64(n) / elapsed.Seconds()},
		Conns:    conns,
	}
}

// merge adds the rounds of one row measured at different times (rows are
// interleaved so that load from outside the bench hits every row alike).
func merge(rs []*run) *run {
	m := *rs[0]
	m.Redis, m.Client, m.Windows = cmdStats{}, cmdStats{}, nil
	m.Acqs, m.AllAcqs, m.Elapsed, m.Errors, m.RedisCPU = 0, 0, 0, 0, 0
	var lat []time.Duration
	var allocs float64
	for _, r := range rs {
		m.Acqs += r.Acqs
		m.AllAcqs += r.AllAcqs
		m.Elapsed += r.Elapsed
		m.Errors += r.Errors
		m.RedisCPU += r.RedisCPU
		m.Windows = append(m.Windows, r.Windows...)
		if len(r.Conns) > 0 && (len(m.Conns) == 0 || r.Conns[0].total() > m.Conns[0].total()) {
			m.Conns = r.Conns // the most any round held
		}
		lat = append(lat, r.Wait...)
		allocs += r.Allocs * float64(r.AllAcqs)
		for k, v := range r.Redis {
			m.Redis[k] += v
		}
		for k, v := range r.Client {
			m.Client[k] += v
		}
	}
	m.Wait = newDist(lat)
	m.Allocs = allocs / float64(max(m.AllAcqs, 1))
	return &m
}

// warm makes a few acquisitions so scripts are loaded and connections open.
func warm(lk locker, key string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 20 {
		release, err := lk.acquire(ctx, key)
		must(err)
		must(release())
	}
}

// hold keeps the lock for d: sleeping, or spinning (yielding the CPU to
// other goroutines between checks).
func hold(d time.Duration, spin bool) {
	switch {
	case d <= 0:
	case !spin:
		time.Sleep(d)
	default:
		for t := time.Now(); time.Since(t) < d; {
			runtime.Gosched()
		}
	}
}
