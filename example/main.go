// Command example is a demo of the code lockgen generates from
// locks.yaml: workers contend for a few orders, stock items (a fair lock),
// shop catalogs (a read-write lock: many readers, an occasional writer)
// and tenant reports through the generated With<Name> helpers, check that
// no lock is ever shared that should not be, and print a summary.
//
// With no flags it runs on an embedded in-process Redis (miniredis, whose
// clock is advanced in real time so leases expire); -redis points it at a
// real server:
//
//	go run ./example
//	go run ./example -redis redis://localhost:6379/0
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/example/gen"
	"github.com/lockgen/lockgen/runtime"
)

func main() {
	redisURL := flag.String("redis", "", "Redis URL, e.g. redis://localhost:6379/0 (default: embedded in-process Redis)")
	workers := flag.Int("workers", 8, "concurrent workers")
	duration := flag.Duration("duration", 2*time.Second, "how long the workers run")
	flag.Parse()
	if err := run(os.Stdout, *redisURL, *workers, *duration); err != nil {
		fmt.Fprintln(os.Stderr, "example:", err)
		os.Exit(1)
	}
}

func run(w io.Writer, redisURL string, workers int, duration time.Duration) error {
	rdb, where, stop, err := connect(redisURL)
	if err != nil {
		return err
	}
	defer stop()
	client, err := runtime.NewClient(rdb, &runtime.Options{
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return err
	}
	defer client.Close()
	locks := gen.New(client)

	fmt.Fprintf(w, "lockgen demo: %d workers for %v on %s\n", workers, duration, where)
	s := newStats()
	ctx, cancel := context.WithTimeout(context.Background(), duration)
	defer cancel()
	var wg sync.WaitGroup
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			worker(ctx, locks, s, rand.New(rand.NewPCG(uint64(i), 42)))
		}()
	}
	wg.Wait()
	return s.print(w)
}

// connect returns a Redis client: the server at url, or an embedded one.
func connect(url string) (redis.UniversalClient, string, func(), error) {
	if url != "" {
		opts, err := redis.ParseURL(url)
		if err != nil {
			return nil, "", nil, err
		}
		rdb := redis.NewClient(opts)
		if err := rdb.Ping(context.Background()).Err(); err != nil {
			return nil, "", nil, fmt.Errorf("redis at %s: %w", url, err)
		}
		return rdb, url, func() { rdb.Close() }, nil
	}
	mr, err := miniredis.Run()
	if err != nil {
		return nil, "", nil, err
	}
	// miniredis only expires keys when told time has passed: advance its
	// clock with the real one so leases run out as they would on Redis.
	done := make(chan struct{})
	go func() {
		last := time.Now()
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				mr.FastForward(now.Sub(last))
				last = now
			}
		}
	}()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	return rdb, "embedded Redis (miniredis " + mr.Addr() + ")", func() {
		rdb.Close()
		close(done)
		mr.Close()
	}, nil
}

// worker takes random locks until ctx is done. Inside each lock it marks
// the resource busy and checks the lock's promise: nobody else inside an
// exclusive lock, no writer beside a reader of the catalog. A broken
// promise is a violation.
func worker(ctx context.Context, locks *gen.Locks, s *stats, rng *rand.Rand) {
	for ctx.Err() == nil {
		start := time.Now()
		var err error
		switch n := rng.IntN(10); {
		case n < 2:
			id := int64(rng.IntN(3))
			err = locks.WithOrderLock(ctx, id, func(ctx context.Context) error {
				defer s.enter("order", id, start)()
				// A nested call with the hold's ctx re-enters the lock.
				return locks.WithOrderLock(ctx, id, func(context.Context) error {
					time.Sleep(time.Millisecond)
					return nil
				})
			})
		case n < 4:
			// Fair: the workers waiting for one SKU get it in arrival order.
			sku := fmt.Sprint("sku-", rng.IntN(2))
			err = locks.WithInventoryLock(ctx, 1, sku, func(ctx context.Context) error {
				defer s.enter("inventory", sku, start)()
				time.Sleep(time.Millisecond)
				return nil
			})
		case n < 8:
			// Many readers share a shop's catalog...
			shop := shops[rng.IntN(len(shops))]
			err = locks.WithCatalogRead(ctx, shop, func(ctx context.Context) error {
				defer s.enterRead("catalog", shop, start)()
				time.Sleep(2 * time.Millisecond)
				return nil
			})
		case n == 8:
			// ...and an occasional reindex writes it alone; writers first,
			// so the readers streaming in cannot hold it off.
			shop := shops[rng.IntN(len(shops))]
			err = locks.WithCatalogWrite(ctx, shop, func(ctx context.Context) error {
				defer s.enter("catalog", shop, start)()
				time.Sleep(time.Millisecond)
				return nil
			})
		default:
			tenant := []string{"acme", "globex"}[rng.IntN(2)]
			err = locks.WithTenantReportLock(ctx, tenant, 5, func(ctx context.Context) error {
				defer s.enter("report", tenant, start)()
				time.Sleep(2 * time.Millisecond)
				return nil
			})
		}
		switch {
		case err == nil:
		case errors.Is(err, runtime.ErrNotAcquired):
			s.timeouts.Add(1)
		case ctx.Err() != nil:
			return
		default:
			s.fail(err)
		}
	}
}

var shops = []string{"shop-1", "shop-2"}

type stats struct {
	mu         sync.Mutex
	writer     map[string]bool // resources held exclusively now
	readers    map[string]int  // readers inside each shared resource now
	maxReaders int             // most readers seen inside one resource at once
	byKind     map[string]int  // acquisitions per lock (and side)
	waits      []time.Duration
	violations int
	errs       []error
	timeouts   atomic.Int64
}

func newStats() *stats {
	return &stats{writer: map[string]bool{}, readers: map[string]int{}, byKind: map[string]int{}}
}

// enter records an exclusive hold of kind:id acquired after waiting since
// start; the caller defers the func it returns to leave.
func (s *stats) enter(kind string, id any, start time.Time) (leave func()) {
	k := s.acquired(kind, id, start, kind)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.writer[k] || s.readers[k] > 0 {
		s.violations++
	}
	s.writer[k] = true
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.writer, k)
	}
}

// enterRead records a shared hold of kind:id, which no writer may share.
func (s *stats) enterRead(kind string, id any, start time.Time) (leave func()) {
	k := s.acquired(kind, id, start, kind+" read")
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.writer[k] {
		s.violations++
	}
	s.readers[k]++
	s.maxReaders = max(s.maxReaders, s.readers[k])
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.readers[k]--
	}
}

func (s *stats) acquired(kind string, id any, start time.Time, counter string) string {
	wait := time.Since(start)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waits = append(s.waits, wait)
	s.byKind[counter]++
	return fmt.Sprint(kind, ":", id)
}

func (s *stats) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errs = append(s.errs, err)
}

func (s *stats) print(w io.Writer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	sort.Slice(s.waits, func(i, j int) bool { return s.waits[i] < s.waits[j] })
	pct := func(p float64) time.Duration {
		if len(s.waits) == 0 {
			return 0
		}
		return s.waits[int(p*float64(len(s.waits)-1))].Round(10 * time.Microsecond)
	}
	fmt.Fprintf(w, "acquisitions:     %d\n", len(s.waits))
	fmt.Fprintf(w, "  order %d, inventory (fair) %d, report %d\n", s.byKind["order"], s.byKind["inventory"], s.byKind["report"])
	fmt.Fprintf(w, "  catalog reads %d (up to %d at once), writes %d\n", s.byKind["catalog read"], s.maxReaders, s.byKind["catalog"])
	fmt.Fprintf(w, "not acquired:     %d (wait time ran out)\n", s.timeouts.Load())
	fmt.Fprintf(w, "wait p50 / p99:   %v / %v\n", pct(0.50), pct(0.99))
	fmt.Fprintf(w, "errors:           %d\n", len(s.errs))
	fmt.Fprintf(w, "violations found: %d\n", s.violations)
	switch {
	case s.violations > 0:
		return fmt.Errorf("%d mutual-exclusion violations", s.violations)
	case len(s.errs) > 0:
		return fmt.Errorf("%d lock errors, first: %w", len(s.errs), s.errs[0])
	case len(s.waits) == 0:
		return errors.New("no lock was acquired")
	}
	return nil
}
