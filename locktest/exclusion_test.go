package locktest_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lockgen/lockgen/example/gen"
	"github.com/lockgen/lockgen/locktest"
	"github.com/lockgen/lockgen/runtime"
)

// TestStockChangesNeverOverlap runs each mix of changes from 8 goroutines
// at once on one SKU, and checks that no two of them overlapped and that
// no change was lost.
func TestStockChangesNeverOverlap(t *testing.T) {
	const workers, rounds, start = 8, 5, 1000
	tests := []struct {
		name string
		// change makes one change and returns what it adds to the stock.
		change func(ctx context.Context, shop *gen.Locks, stock Stock, worker int) (int, error)
	}{
		{"reservations", func(ctx context.Context, shop *gen.Locks, stock Stock, worker int) (int, error) {
			return -1, Reserve(ctx, shop, stock, "sku-1", 1)
		}},
		{"reservations and restocks", func(ctx context.Context, shop *gen.Locks, stock Stock, worker int) (int, error) {
			if worker%2 == 0 {
				return 3, Restock(ctx, shop, stock, "sku-1", 3)
			}
			return -1, Reserve(ctx, shop, stock, "sku-1", 1)
		}},
		{"reservations and checkouts", func(ctx context.Context, shop *gen.Locks, stock Stock, worker int) (int, error) {
			if worker%2 == 0 {
				return -1, Checkout(ctx, shop, stock, int64(worker), "sku-1", 1)
			}
			return -1, Reserve(ctx, shop, stock, "sku-1", 1)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			shop := gen.New(locktest.Client(t, nil))
			stock := newFakeStock(map[string]int{"sku-1": start})
			var want, made atomic.Int64
			want.Store(start)
			var wg sync.WaitGroup
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range rounds {
						delta, err := tt.change(context.Background(), shop, stock, w)
						switch {
						case err == nil:
							want.Add(int64(delta))
							made.Add(1)
						case errors.Is(err, runtime.ErrNotAcquired):
							// The wait time ran out (a loaded machine):
							// fn did not run, nothing changed.
						default:
							t.Error(err)
						}
					}
				}()
			}
			wg.Wait()
			count, overlaps := stock.result("sku-1")
			if overlaps > 0 {
				t.Errorf("%d calls to the stock overlapped another for the same SKU", overlaps)
			}
			if int64(count) != want.Load() {
				t.Errorf("stock %d after %d changes, want %d: changes were lost", count, made.Load(), want.Load())
			}
			if made.Load() < workers {
				t.Errorf("only %d changes were made: too few to tell", made.Load())
			}
		})
	}
}

// TestTheFakeStockSeesChangesThatAreNotKeptApart: without the lock, the
// test above fails (a check that it can).
func TestTheFakeStockSeesChangesThatAreNotKeptApart(t *testing.T) {
	stock := newFakeStock(map[string]int{"sku-1": 100})
	begin := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-begin
			_ = take(context.Background(), stock, "sku-1", 1) // no lock
		}()
	}
	close(begin)
	wg.Wait()
	if _, overlaps := stock.result("sku-1"); overlaps == 0 {
		t.Fatal("8 reservations without the lock, and the fake stock saw no overlap")
	}
}
