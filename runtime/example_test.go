package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime"
)

// The examples run on an embedded Redis (miniredis) so that they are
// self-contained; any Redis will do: pass redis.NewClient(&redis.Options{
// Addr: "localhost:6379"}), a ClusterClient or a FailoverClient instead.

// One Client per process and Redis deployment; a handle per key. Do holds
// the lock while fn runs, and its ctx says when the lock is lost.
func Example() {
	c, done := exampleClient(nil)
	defer done()

	orders := c.Mutex("order:42", runtime.LockOptions{Name: "OrderLock", WaitTime: 3 * time.Second})
	err := orders.Do(context.Background(), func(ctx context.Context) error {
		// Only one process at a time gets here for order 42. ctx is
		// cancelled with a cause wrapping ErrLockLost if the lock is lost.
		fmt.Println("holding", orders.Key())
		return nil
	})
	fmt.Println("err:", err)
	// Output:
	// holding order:42
	// err: <nil>
}

// Ownership follows the ctx: acquiring again with the hold's ctx re-enters
// the lock and counts up, as Redisson does per thread; a fresh ctx is
// another owner and has to wait.
func ExampleMutex_Lock() {
	c, done := exampleClient(nil)
	defer done()
	m := c.Mutex("inventory:sku-1", runtime.LockOptions{Name: "InventoryLock"})

	held, err := m.Lock(context.Background())
	if err != nil {
		panic(err)
	}
	inner, _ := m.Lock(held) // the same owner: re-enters
	n, _ := m.HoldCount(inner)
	fmt.Println("holds:", n)

	_, err = m.TryLock(context.Background(), 0, runtime.Watchdog) // another owner, one try
	fmt.Println("another owner:", errors.Is(err, runtime.ErrNotAcquired))

	_ = m.Unlock(inner)
	_ = m.Unlock(held) // Unlock runs even when held is cancelled: releases never leak
	locked, _ := m.IsLocked(context.Background())
	fmt.Println("locked after both unlocks:", locked)
	// Output:
	// holds: 2
	// another owner: true
	// locked after both unlocks: false
}

// TryLock waits up to a time and holds with a fixed lease, never renewed:
// the hold's ctx ends shortly before the key expires in Redis.
func ExampleMutex_TryLock() {
	c, done := exampleClient(nil)
	defer done()

	held, err := c.Mutex("report:daily", runtime.LockOptions{}).TryLock(context.Background(), 100*time.Millisecond, 100*time.Millisecond)
	if err != nil {
		panic(err)
	}
	<-held.Done() // before the 100ms run out
	fmt.Println(errors.Is(context.Cause(held), runtime.ErrLockLost))
	// Output: true
}

// A fair lock grants waiters in the order they asked: the reservations
// queued behind the holder get the stock in arrival order.
func ExampleClient_FairLock() {
	c, mr, done := exampleClientAndServer(nil)
	defer done()
	stock := c.FairLock("inventory:sku-7", runtime.LockOptions{Name: "InventoryLock", WaitTime: 5 * time.Second})

	held, err := stock.Lock(context.Background())
	if err != nil {
		panic(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var order []string
	for i, who := range []string{"first", "second", "third"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = stock.Do(context.Background(), func(context.Context) error {
				mu.Lock()
				order = append(order, who)
				mu.Unlock()
				return nil
			})
		}()
		waitForQueue(mr, "redisson_lock_queue:{inventory:sku-7}", i+1) // queued before the next one asks
	}
	_ = stock.Unlock(held)
	wg.Wait()
	fmt.Println(order)
	// Output: [first second third]
}

// A read-write lock lets many readers in, or one writer. A reader cannot
// upgrade to writing: it would wait for itself, so it is told at once.
func ExampleClient_ReadWrite() {
	c, done := exampleClient(nil)
	defer done()
	catalog := c.ReadWrite("catalog:shop-1", runtime.LockOptions{Name: "Catalog"})

	reading, err := catalog.Read().Lock(context.Background())
	if err != nil {
		panic(err)
	}
	other, err := catalog.Read().TryLock(context.Background(), 0, runtime.Watchdog)
	fmt.Println("second reader:", err)
	_, err = catalog.Write().TryLock(context.Background(), 0, runtime.Watchdog)
	fmt.Println("writer while read:", errors.Is(err, runtime.ErrNotAcquired))
	_, err = catalog.Write().TryLock(reading, 0, runtime.Watchdog)
	fmt.Println("reader upgrading:", errors.Is(err, runtime.ErrUpgrade))

	_ = catalog.Read().Unlock(other)
	_ = catalog.Read().Unlock(reading)
	err = catalog.Write().Do(context.Background(), func(context.Context) error { return nil })
	fmt.Println("writer after the readers:", err)
	// Output:
	// second reader: <nil>
	// writer while read: true
	// reader upgrading: true
	// writer after the readers: <nil>
}

// A multi-lock holds all its members or none. Reentrant members on one
// server are taken by one script call; when one member is busy, nothing
// is taken.
func ExampleClient_MultiLock() {
	c, done := exampleClient(nil)
	defer done()
	order := c.Mutex("order:42", runtime.LockOptions{Name: "OrderLock"})
	stock := c.Mutex("stock:sku-7", runtime.LockOptions{Name: "StockLock"})
	checkout := c.MultiLock(runtime.LockOptions{Name: "CheckoutLock"}, order, stock)
	fmt.Println("keys:", checkout.Keys(), "atomic:", checkout.Atomic())

	err := checkout.Do(context.Background(), func(ctx context.Context) error {
		n, _ := order.HoldCount(ctx) // the hold's ctx holds every member
		fmt.Println("order held, count", n)
		return nil
	})
	fmt.Println("err:", err)

	busy, _ := stock.Lock(context.Background())
	_, err = checkout.TryLock(context.Background(), 0, runtime.Watchdog)
	orderLocked, _ := order.IsLocked(context.Background())
	fmt.Println("with stock busy:", errors.Is(err, runtime.ErrNotAcquired), "order left locked:", orderLocked)
	_ = stock.Unlock(busy)
	// Output:
	// keys: [order:42 stock:sku-7] atomic: true
	// order held, count 1
	// err: <nil>
	// with stock busy: true order left locked: false
}

// A RedLock spans independent Redis masters (Options.RedLockNodes) and
// holds while a majority grant it: here two of three, one node being down.
func ExampleClient_RedLock() {
	var nodes []redis.UniversalClient
	for i := range 3 {
		mr := miniredis.NewMiniRedis()
		if err := mr.Start(); err != nil {
			panic(err)
		}
		defer mr.Close()
		rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1, DialerRetries: 1})
		defer rdb.Close()
		nodes = append(nodes, rdb)
		if i == 2 {
			mr.Close() // a node that is down
		}
	}
	c, done := exampleClient(&runtime.Options{RedLockNodes: nodes})
	defer done()

	payment := c.RedLock("payment:pay-9", runtime.LockOptions{Name: "PaymentLock", WaitTime: time.Second})
	err := payment.Do(context.Background(), func(ctx context.Context) error {
		granted := 0
		for _, n := range nodes[:2] {
			granted += int(n.Exists(ctx, payment.Key()).Val())
		}
		fmt.Println("held on", granted, "of the 2 live nodes")
		return nil
	})
	fmt.Println("err:", err)
	// Output:
	// held on 2 of the 2 live nodes
	// err: <nil>
}

// An Observer turns lock events into metrics. This one feeds a histogram of
// how long holds last (a Prometheus histogram would take the same values),
// and counts events by kind.
func ExampleObserver() {
	holds := newHistogram(200 * time.Millisecond)
	var mu sync.Mutex
	counts := map[runtime.EventKind]int{}
	observer := runtime.ObserverFunc(func(e runtime.Event) {
		mu.Lock()
		defer mu.Unlock()
		counts[e.Kind]++
		if e.Kind == runtime.EventReleased {
			holds.observe(e.Held)
		}
	})
	c, done := exampleClient(&runtime.Options{Observer: observer})
	defer done()

	m := c.Mutex("job:nightly", runtime.LockOptions{Name: "NightlyJob"})
	// The buckets are far apart: a hold of no work stays under 200 ms even
	// on a loaded machine running the race detector.
	for _, work := range []time.Duration{0, 400 * time.Millisecond} {
		_ = m.Do(context.Background(), func(context.Context) error {
			time.Sleep(work)
			return nil
		})
	}
	mu.Lock()
	defer mu.Unlock()
	fmt.Println(runtime.EventAcquired, counts[runtime.EventAcquired], runtime.EventReleased, counts[runtime.EventReleased])
	fmt.Print(holds)
	// Output:
	// acquired 2 released 2
	// held <= 200ms: 1
	// held > 200ms: 1
}

// A *LockError names the lock, its key and the operation, and wraps a
// sentinel for errors.Is. Its prefix appears once per chain: a release
// that reports the loss a renewal found does not repeat the lock's name.
func ExampleLockError() {
	lost := &runtime.LockError{Op: "renew", Name: "OrderLock", Key: "order:99", Err: runtime.ErrLockLost}
	err := &runtime.LockError{Op: "release", Name: "OrderLock", Key: "order:99", Err: lost}
	fmt.Println(err)
	fmt.Println(errors.Is(err, runtime.ErrLockLost))

	var le *runtime.LockError
	if errors.As(err, &le) {
		fmt.Println(le.Name, le.Key, le.Op)
	}
	// Another lock's error inside keeps its own name: here a multi-lock's member.
	member := &runtime.LockError{Op: "acquire", Name: "StockLock", Key: "stock:7", Err: runtime.ErrNotAcquired}
	fmt.Println(&runtime.LockError{Op: "acquire", Name: "CheckoutLock", Key: "order:99,stock:7", Err: member})
	// Output:
	// lockgen: OrderLock (order:99): release: renew: lock lost
	// true
	// OrderLock order:99 release
	// lockgen: CheckoutLock (order:99,stock:7): acquire: lockgen: StockLock (stock:7): acquire: lock not acquired within the wait time
}

// histogram counts durations into buckets with upper bounds.
type histogram struct {
	bounds []time.Duration
	counts []int // one per bound, and one above the last
}

func newHistogram(bounds ...time.Duration) *histogram {
	return &histogram{bounds: bounds, counts: make([]int, len(bounds)+1)}
}

func (h *histogram) observe(d time.Duration) {
	i := 0
	for i < len(h.bounds) && d > h.bounds[i] {
		i++
	}
	h.counts[i]++
}

func (h *histogram) String() string {
	s := ""
	for i, b := range h.bounds {
		s += fmt.Sprintf("held <= %v: %d\n", b, h.counts[i])
	}
	return s + fmt.Sprintf("held > %v: %d\n", h.bounds[len(h.bounds)-1], h.counts[len(h.bounds)])
}

// exampleClient returns a Client on an embedded Redis and a func that closes
// both.
func exampleClient(opts *runtime.Options) (*runtime.Client, func()) {
	c, _, done := exampleClientAndServer(opts)
	return c, done
}

func exampleClientAndServer(opts *runtime.Options) (*runtime.Client, *miniredis.Miniredis, func()) {
	mr, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	c, err := runtime.NewClient(rdb, opts)
	if err != nil {
		panic(err)
	}
	return c, mr, func() {
		c.Close()
		rdb.Close()
		mr.Close()
	}
}

// waitForQueue waits until the Redis list key holds n entries.
func waitForQueue(mr *miniredis.Miniredis, key string, n int) {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if l, _ := mr.List(key); len(l) >= n {
			return
		}
	}
	panic(fmt.Sprintf("%s never held %d waiters", key, n))
}
