package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/lockgen/lockgen/runtime"
)

// latencies is a runtime.Observer that keeps, per lock, a histogram of
// acquisition latency (the time from the call to the hold, wait included)
// and counts of failures and losses: what -metrics prints at the end. In
// a service the same events feed OpenTelemetry (module
// github.com/lockgen/lockgen/otel) or any metrics library.
type latencies struct {
	mu    sync.Mutex
	locks map[string]*lockLatency
}

type lockLatency struct {
	buckets [len(bucketBounds) + 1]int
	waits   []time.Duration
	failed  int
	lost    int
}

// bucketBounds are the upper bounds of the histogram's buckets; the last
// bucket is everything above.
var bucketBounds = [...]time.Duration{time.Millisecond, 5 * time.Millisecond, 25 * time.Millisecond, 100 * time.Millisecond}

func newLatencies() *latencies { return &latencies{locks: map[string]*lockLatency{}} }

// ObserveLock records acquisitions, failures and losses by lock name.
func (l *latencies) ObserveLock(e runtime.Event) {
	if e.Kind != runtime.EventAcquired && e.Kind != runtime.EventAcquireFailed && e.Kind != runtime.EventLost {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.locks[e.Name]
	if s == nil {
		s = &lockLatency{}
		l.locks[e.Name] = s
	}
	switch e.Kind {
	case runtime.EventAcquired:
		i := sort.Search(len(bucketBounds), func(i int) bool { return e.Wait < bucketBounds[i] })
		s.buckets[i]++
		s.waits = append(s.waits, e.Wait)
	case runtime.EventAcquireFailed:
		s.failed++
	case runtime.EventLost:
		s.lost++
	}
}

// print writes one short histogram per lock, in name order.
func (l *latencies) print(w io.Writer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	names := make([]string, 0, len(l.locks))
	for n := range l.locks {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintln(w, "acquire latency per lock (call to hold, wait included), from the runtime's Observer:")
	labels := []string{"<1ms", "1-5ms", "5-25ms", "25-100ms", ">=100ms"}
	for _, n := range names {
		s := l.locks[n]
		sort.Slice(s.waits, func(i, j int) bool { return s.waits[i] < s.waits[j] })
		fmt.Fprintf(w, "  %-16s n=%-5d p50 %-8v p99 %-8v gave up %d, lost %d\n", n, len(s.waits),
			quantile(s.waits, 0.50), quantile(s.waits, 0.99), s.failed, s.lost)
		most := 1
		for _, c := range s.buckets {
			most = max(most, c)
		}
		for i, c := range s.buckets {
			if c == 0 {
				continue
			}
			bar := strings.Repeat("#", max(1, c*30/most))
			fmt.Fprintf(w, "    %-9s %-30s %d\n", labels[i], bar, c)
		}
	}
}

// quantile is the q-quantile of sorted waits, rounded for reading.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	d := sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
	if d > time.Millisecond {
		return d.Round(100 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}
