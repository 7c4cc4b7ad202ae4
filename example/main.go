// Command example is a demo of the code lockgen generates from
// locks.yaml: workers contend for a few orders, stock items (a fair lock),
// shop catalogs (a read-write lock: many readers, an occasional writer),
// checkouts (a multi-lock over an order and a stock item), payments (a
// RedLock over independent Redis nodes), tenant reports, ledger postings (a
// fenced lock: tokens only grow), calls to the payment provider (a
// semaphore of 3 permits per shop) and a sharded import awaited through a
// count-down latch, all through the generated helpers; they check that no
// lock is ever shared that should not be, that no more permits are held
// than there are, and print a summary.
//
// With no flags it runs on embedded in-process Redis servers (miniredis,
// whose clock is advanced in real time so leases expire): one for the
// locks, three more as the RedLock nodes. -redis points the locks at a
// real server and -red the RedLock at real independent masters (several
// databases of one server would not be independent):
//
//	go run ./example
//	go run ./example -redis redis://localhost:6379/0 -red redis://host1:6379,redis://host2:6379,redis://host3:6379
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
	"strings"
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
	redURLs := flag.String("red", "", "comma-separated URLs of the independent Redis masters the RedLock spans (default: 3 embedded in-process Redis)")
	workers := flag.Int("workers", 8, "concurrent workers")
	duration := flag.Duration("duration", 2*time.Second, "how long the workers run")
	metrics := flag.Bool("metrics", false, "print a latency histogram per lock at the end (from a runtime.Observer)")
	flag.Parse()
	var red []string
	if *redURLs != "" {
		red = strings.Split(*redURLs, ",")
	}
	var obs *latencies
	if *metrics {
		obs = newLatencies()
	}
	if err := runObserved(os.Stdout, *redisURL, red, *workers, *duration, obs); err != nil {
		fmt.Fprintln(os.Stderr, "example:", err)
		os.Exit(1)
	}
}

// redNodes is how many embedded RedLock nodes run without -red.
const redNodes = 3

func run(w io.Writer, redisURL string, redURLs []string, workers int, duration time.Duration) error {
	return runObserved(w, redisURL, redURLs, workers, duration, nil)
}

// runObserved is run; with obs, it records the locks' latencies and
// prints them after the summary.
func runObserved(w io.Writer, redisURL string, redURLs []string, workers int, duration time.Duration, obs *latencies) error {
	rdb, where, stop, err := connect(redisURL)
	if err != nil {
		return err
	}
	defer stop()
	nodes := make([]redis.UniversalClient, max(len(redURLs), redNodes))
	redWhere := fmt.Sprint(len(nodes), " embedded Redis (miniredis)")
	if len(redURLs) > 0 {
		nodes, redWhere = nodes[:len(redURLs)], strings.Join(redURLs, ", ")
	}
	for i := range nodes {
		url := ""
		if len(redURLs) > 0 {
			url = redURLs[i]
		}
		node, _, stop, err := connect(url)
		if err != nil {
			return err
		}
		defer stop()
		nodes[i] = node
	}
	opts := runtime.Options{
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
		RedLockNodes: nodes,
	}
	if obs != nil {
		opts.Observer = obs
	}
	client, err := runtime.NewClient(rdb, &opts)
	if err != nil {
		return err
	}
	defer client.Close()
	locks := gen.New(client)

	fmt.Fprintf(w, "lockgen demo: %d workers for %v on %s\n", workers, duration, where)
	fmt.Fprintf(w, "RedLock nodes:    %s\n", redWhere)
	s := newStats()
	ctx, cancel := context.WithTimeout(context.Background(), duration)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		importBatch(ctx, locks, s)
	}()
	// One caller more than there are payment slots, on one shop, so the
	// semaphore is full most of the time; and a ledger poster.
	for range paymentSlots + 1 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			callProvider(ctx, locks, s)
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		post(ctx, locks, s, 1)
	}()
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			worker(ctx, locks, s, rand.New(rand.NewPCG(uint64(i), 42)))
		}()
	}
	wg.Wait()
	if obs != nil {
		obs.print(w) // before the summary, which ends with the violations
	}
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
// the resources it guards busy and checks the lock's promise: nobody else
// inside an exclusive lock, no writer beside a reader of the catalog. A
// broken promise is a violation.
func worker(ctx context.Context, locks *gen.Locks, s *stats, rng *rand.Rand) {
	for ctx.Err() == nil {
		start := time.Now()
		var err error
		switch n := rng.IntN(12); {
		case n < 2:
			id := int64(rng.IntN(3))
			err = locks.WithOrderLock(ctx, id, func(ctx context.Context) error {
				defer s.enter("order", start, res("order", id))()
				// A nested call with the hold's ctx re-enters the lock.
				return locks.WithOrderLock(ctx, id, func(context.Context) error {
					time.Sleep(time.Millisecond)
					return nil
				})
			})
		case n < 4:
			// Fair: the workers waiting for one SKU get it in arrival order.
			sku := skus[rng.IntN(len(skus))]
			err = locks.WithInventoryLock(ctx, 1, sku, func(ctx context.Context) error {
				defer s.enter("inventory", start, res("inventory", sku))()
				time.Sleep(time.Millisecond)
				return nil
			})
		case n < 8:
			// Many readers share a shop's catalog...
			shop := shops[rng.IntN(len(shops))]
			err = locks.WithCatalogRead(ctx, shop, func(ctx context.Context) error {
				defer s.enterRead("catalog read", start, res("catalog", shop))()
				time.Sleep(2 * time.Millisecond)
				return nil
			})
		case n == 8:
			// ...and an occasional reindex writes it alone; writers first,
			// so the readers streaming in cannot hold it off.
			shop := shops[rng.IntN(len(shops))]
			err = locks.WithCatalogWrite(ctx, shop, func(ctx context.Context) error {
				defer s.enter("catalog", start, res("catalog", shop))()
				time.Sleep(time.Millisecond)
				return nil
			})
		case n == 9:
			// A checkout holds its order and its stock item at once: no
			// order or inventory worker may be inside either meanwhile.
			id, sku := int64(rng.IntN(3)), skus[rng.IntN(len(skus))]
			err = locks.WithCheckoutLock(ctx, id, 1, sku, func(ctx context.Context) error {
				defer s.enter("checkout", start, res("order", id), res("inventory", sku))()
				time.Sleep(time.Millisecond)
				return nil
			})
		case n == 10:
			// A RedLock: held on a majority of the independent nodes.
			id := payments[rng.IntN(len(payments))]
			err = locks.WithPaymentLock(ctx, id, func(ctx context.Context) error {
				defer s.enter("payment", start, res("payment", id))()
				time.Sleep(time.Millisecond)
				return nil
			})
		default:
			tenant := []string{"acme", "globex"}[rng.IntN(2)]
			err = locks.WithTenantReportLock(ctx, tenant, 5, func(ctx context.Context) error {
				defer s.enter("report", start, res("report", tenant))()
				time.Sleep(2 * time.Millisecond)
				return nil
			})
		}
		if !s.settle(ctx, err) {
			return
		}
	}
}

// demoRounds is how many calls each provider caller and the ledger poster
// make: enough to fill the semaphore, few enough to leave the machine to
// the workers.
const demoRounds = 10

// callProvider calls the payment provider for shop-1 demoRounds times (or
// until ctx is done), each call holding one of its PaymentSlots (a
// semaphore).
func callProvider(ctx context.Context, locks *gen.Locks, s *stats) {
	for range demoRounds {
		start := time.Now()
		err := locks.WithPaymentSlots(ctx, "shop-1", func(ctx context.Context) error {
			defer s.enterPermit("payment slot", start, "payment-slots:shop-1", paymentSlots)()
			time.Sleep(5 * time.Millisecond)
			return nil
		})
		if !s.settle(ctx, err) {
			return
		}
	}
}

// post posts to account's ledger demoRounds times (or until ctx is done).
// Fenced: each posting carries its token, and the ledger refuses one older
// than the newest it has seen.
func post(ctx context.Context, locks *gen.Locks, s *stats, account int64) {
	for range demoRounds {
		start := time.Now()
		err := locks.WithLedgerLock(ctx, account, func(ctx context.Context, fence int64) error {
			defer s.enter("ledger", start, res("ledger", account))()
			s.post(account, fence)
			return nil
		})
		if !s.settle(ctx, err) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// settle records the outcome of one call, and reports whether to go on.
func (s *stats) settle(ctx context.Context, err error) bool {
	switch {
	case err == nil:
	case errors.Is(err, runtime.ErrNotAcquired):
		s.timeouts.Add(1)
	case ctx.Err() != nil:
		return false
	default:
		s.fail(err)
	}
	return true
}

// paymentSlots is PaymentSlots' permits in example/locks.yaml.
const paymentSlots = 3

// importShards is ImportDone's count in example/locks.yaml.
const importShards = 3

// importBatch runs one sharded import: it arms the latch, starts reporters
// that await it and shards that count it down when done, and records how
// many reporters were released (all of them, after the last shard).
func importBatch(ctx context.Context, locks *gen.Locks, s *stats) {
	batch := fmt.Sprint("batch-", time.Now().UnixNano())
	if _, err := locks.ArmImportDone(ctx, batch); err != nil {
		s.settle(ctx, err)
		return
	}
	var shardsDone atomic.Int32
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := locks.AwaitImportDone(ctx, batch); err != nil {
				s.settle(ctx, err)
				return
			}
			// A reporter released before every shard counted down
			// would report on a partial import.
			s.released(int(shardsDone.Load()) < importShards)
		}()
	}
	for i := range importShards {
		time.Sleep(time.Duration(20*(i+1)) * time.Millisecond)
		shardsDone.Add(1)
		if err := locks.CountDownImportDone(ctx, batch); err != nil {
			s.settle(ctx, err)
		}
	}
	wg.Wait()
}

// res names a resource a lock guards, e.g. order:2.
func res(kind string, id any) string { return fmt.Sprint(kind, ":", id) }

var (
	shops    = []string{"shop-1", "shop-2"}
	skus     = []string{"sku-0", "sku-1"}
	payments = []string{"pay-1", "pay-2"}
)

type stats struct {
	mu         sync.Mutex
	writer     map[string]bool // resources held exclusively now
	readers    map[string]int  // readers inside each shared resource now
	maxReaders int             // most readers seen inside one resource at once
	byKind     map[string]int  // acquisitions per lock (and catalog side)
	waits      []time.Duration
	violations int
	errs       []error
	permits    map[string]int  // permits held now, per semaphore
	maxPermits int             // most permits of one semaphore held at once
	fences     map[int64]int64 // the ledger: the newest token each account saw
	releases   int             // latch waiters released
	timeouts   atomic.Int64
}

func newStats() *stats {
	return &stats{writer: map[string]bool{}, readers: map[string]int{}, byKind: map[string]int{},
		permits: map[string]int{}, fences: map[int64]int64{}}
}

// enter records an exclusive hold of resources, counted as counter and
// acquired after waiting since start; the caller defers the func it
// returns to leave.
func (s *stats) enter(counter string, start time.Time, resources ...string) (leave func()) {
	s.acquired(counter, start)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range resources {
		if s.writer[r] || s.readers[r] > 0 {
			s.violations++
		}
		s.writer[r] = true
	}
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, r := range resources {
			delete(s.writer, r)
		}
	}
}

// enterRead records a shared hold of resource, which no writer may share.
func (s *stats) enterRead(counter string, start time.Time, resource string) (leave func()) {
	s.acquired(counter, start)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.writer[resource] {
		s.violations++
	}
	s.readers[resource]++
	s.maxReaders = max(s.maxReaders, s.readers[resource])
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.readers[resource]--
	}
}

// enterPermit records a permit of semaphore held, of which at most
// permits may be held at once.
func (s *stats) enterPermit(counter string, start time.Time, semaphore string, permits int) (leave func()) {
	s.acquired(counter, start)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.permits[semaphore]++
	if s.permits[semaphore] > permits {
		s.violations++
	}
	s.maxPermits = max(s.maxPermits, s.permits[semaphore])
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.permits[semaphore]--
	}
}

// post is a ledger posting with its fencing token: one older than the
// newest the account has seen is a violation (the ledger would refuse it).
func (s *stats) post(account, fence int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if fence <= s.fences[account] {
		s.violations++
	}
	s.fences[account] = fence
}

// released records a latch waiter released; early means before the last
// count-down, a violation.
func (s *stats) released(early bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.releases++
	if early {
		s.violations++
	}
}

func (s *stats) acquired(counter string, start time.Time) {
	wait := time.Since(start)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waits = append(s.waits, wait)
	s.byKind[counter]++
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
	fmt.Fprintf(w, "  checkout (multi: order + inventory) %d, payment (red) %d\n", s.byKind["checkout"], s.byKind["payment"])
	fmt.Fprintf(w, "  ledger (fenced) %d, payment slots (semaphore) %d, at most %d of %d permits held at once\n", s.byKind["ledger"], s.byKind["payment slot"], s.maxPermits, paymentSlots)
	fmt.Fprintf(w, "latch:            %d reporters released after %d import shards counted down\n", s.releases, importShards)
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
