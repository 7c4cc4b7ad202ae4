package locktest_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/lockgen/lockgen/example/gen"
	"github.com/lockgen/lockgen/locktest"
)

// The code under test: the stock of a shop, changed by reservations,
// restocks and checkouts. Each change reads the stock and writes it back
// in two calls, so only the SKU's lock stops two changes from interleaving
// and losing one of them.

// Stock is where the counts live: a database in production, a fake in
// tests.
type Stock interface {
	Get(ctx context.Context, sku string) (int, error)
	Set(ctx context.Context, sku string, n int) error
}

// ErrOutOfStock: there are fewer than asked for.
var ErrOutOfStock = errors.New("out of stock")

const warehouse = 1 // the shop has one

// Reserve takes n of sku, if there are that many.
func Reserve(ctx context.Context, shop *gen.Locks, stock Stock, sku string, n int) error {
	return shop.WithInventoryLock(ctx, warehouse, sku, func(ctx context.Context) error {
		return take(ctx, stock, sku, n)
	})
}

// Restock adds n of sku.
func Restock(ctx context.Context, shop *gen.Locks, stock Stock, sku string, n int) error {
	return shop.WithInventoryLock(ctx, warehouse, sku, func(ctx context.Context) error {
		have, err := stock.Get(ctx, sku)
		if err != nil {
			return err
		}
		return stock.Set(ctx, sku, have+n)
	})
}

// Checkout reserves n of sku for an order, holding the order as well.
func Checkout(ctx context.Context, shop *gen.Locks, stock Stock, orderID int64, sku string, n int) error {
	return shop.WithCheckoutLock(ctx, orderID, warehouse, sku, func(ctx context.Context) error {
		return take(ctx, stock, sku, n)
	})
}

func take(ctx context.Context, stock Stock, sku string, n int) error {
	have, err := stock.Get(ctx, sku)
	if err != nil {
		return err
	}
	if have < n {
		return ErrOutOfStock
	}
	return stock.Set(ctx, sku, have-n)
}

// fakeStock keeps the counts in memory. Each call takes a millisecond, as
// a round trip to a database would, so that changes that are not kept
// apart overlap; and it counts the calls for a SKU that began while
// another call for it was under way. Under the SKU's lock there are none.
type fakeStock struct {
	mu       sync.Mutex
	counts   map[string]int
	inFlight map[string]int
	overlaps int
}

func newFakeStock(counts map[string]int) *fakeStock {
	return &fakeStock{counts: counts, inFlight: map[string]int{}}
}

func (s *fakeStock) Get(ctx context.Context, sku string) (n int, err error) {
	s.call(sku, func() { n = s.counts[sku] })
	return n, nil
}

func (s *fakeStock) Set(ctx context.Context, sku string, n int) error {
	s.call(sku, func() { s.counts[sku] = n })
	return nil
}

func (s *fakeStock) call(sku string, f func()) {
	s.mu.Lock()
	if s.inFlight[sku]++; s.inFlight[sku] > 1 {
		s.overlaps++
	}
	s.mu.Unlock()
	time.Sleep(time.Millisecond)
	s.mu.Lock()
	defer s.mu.Unlock()
	f()
	s.inFlight[sku]--
}

func (s *fakeStock) result(sku string) (count, overlaps int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[sku], s.overlaps
}

func TestReserveTakesFromTheStock(t *testing.T) {
	shop := gen.New(locktest.Client(t, nil))
	stock := newFakeStock(map[string]int{"sku-1": 5})
	if err := Reserve(context.Background(), shop, stock, "sku-1", 2); err != nil {
		t.Fatal(err)
	}
	if n, _ := stock.Get(context.Background(), "sku-1"); n != 3 {
		t.Fatalf("stock %d after reserving 2 of 5", n)
	}
}
