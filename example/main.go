// Command example is a demo of the code lockgen generates from
// locks.yaml: workers contend for a few orders, stock items and tenant
// reports through the generated With<Name> helpers, check that no two of
// them are ever inside the same lock at once, and print a summary.
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
// the resource busy and checks nobody else has: a second holder would be a
// mutual-exclusion violation.
func worker(ctx context.Context, locks *gen.Locks, s *stats, rng *rand.Rand) {
	for ctx.Err() == nil {
		start := time.Now()
		var err error
		switch rng.IntN(3) {
		case 0:
			id := int64(rng.IntN(3))
			err = locks.WithOrderLock(ctx, id, func(ctx context.Context) error {
				s.enter("order", id, time.Since(start))
				defer s.leave("order", id)
				// A nested call with the hold's ctx re-enters the lock.
				return locks.WithOrderLock(ctx, id, func(context.Context) error {
					time.Sleep(time.Millisecond)
					return nil
				})
			})
		case 1:
			sku := fmt.Sprint("sku-", rng.IntN(2))
			err = locks.WithInventoryLock(ctx, 1, sku, func(ctx context.Context) error {
				s.enter("inventory", sku, time.Since(start))
				defer s.leave("inventory", sku)
				time.Sleep(time.Millisecond)
				return nil
			})
		default:
			tenant := []string{"acme", "globex"}[rng.IntN(2)]
			err = locks.WithTenantReportLock(ctx, tenant, 5, func(ctx context.Context) error {
				s.enter("report", tenant, time.Since(start))
				defer s.leave("report", tenant)
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

type stats struct {
	mu         sync.Mutex
	busy       map[string]bool
	waits      []time.Duration
	violations int
	errs       []error
	timeouts   atomic.Int64
}

func newStats() *stats { return &stats{busy: map[string]bool{}} }

func (s *stats) enter(kind string, id any, wait time.Duration) {
	k := fmt.Sprint(kind, ":", id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.busy[k] {
		s.violations++
	}
	s.busy[k] = true
	s.waits = append(s.waits, wait)
}

func (s *stats) leave(kind string, id any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.busy, fmt.Sprint(kind, ":", id))
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
