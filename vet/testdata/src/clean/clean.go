// want package:`order locks\.OrderLock>locks\.InventoryLock locks\.OrderLock>locks\.InventoryLock locks\.OrderLock>locks\.InventoryLock\}$`

// Package clean is a realistic service that uses its locks correctly:
// one order everywhere, the hold's ctx for nested locks, a multi lock
// instead of nesting, goroutines that finish inside the hold; and two
// deliberate, silenced findings.
package clean

import (
	"context"
	"errors"
	"sync"

	"example.com/vettest/locks"
)

type Shop struct {
	l     *locks.Locks
	mu    sync.Mutex
	stock map[string]int
}

// Reserve always takes OrderLock before InventoryLock.
func (s *Shop) Reserve(ctx context.Context, id int64, sku string) error { // want Reserve:`^acquires locks\.InventoryLock, locks\.OrderLock$`
	return s.l.WithOrderLock(ctx, id, func(ctx context.Context) error {
		return s.l.WithInventoryLock(ctx, sku, func(ctx context.Context) error {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.stock[sku] == 0 {
				return errors.New("out of stock")
			}
			s.stock[sku]--
			return nil
		})
	})
}

// Cancel takes them in the same order, through a helper.
func (s *Shop) Cancel(ctx context.Context, id int64, sku string) error { // want Cancel:`^acquires locks\.InventoryLock, locks\.OrderLock$`
	return s.l.WithOrderLock(ctx, id, func(hctx context.Context) error {
		return s.restock(hctx, sku)
	})
}

func (s *Shop) restock(ctx context.Context, sku string) error {
	return s.l.WithInventoryLock(ctx, sku, func(context.Context) error { return nil })
}

// Checkout takes both at once instead of nesting them.
func (s *Shop) Checkout(ctx context.Context, id int64, sku string) error { // want Checkout:`^acquires locks\.InventoryLock, locks\.OrderLock$`
	return s.l.WithCheckoutLock(ctx, id, sku, func(ctx context.Context) error {
		return s.l.WithOrderLock(ctx, id, func(ctx context.Context) error { return nil }) // re-entry
	})
}

// Fanout runs goroutines under the hold that end before fn returns, on
// ctxs that do not carry the hold.
func (s *Shop) Fanout(ctx context.Context, id int64, skus []string) error { // want Fanout:`^acquires locks\.OrderLock$`
	return s.l.WithOrderLock(ctx, id, func(hctx context.Context) error {
		var wg sync.WaitGroup
		for _, sku := range skus {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = s.restock(ctx, sku)
			}()
		}
		wg.Wait()
		return hctx.Err()
	})
}

// Parallel hands the hold's ctx to goroutines it waits for: they end
// before the hold does.
func (s *Shop) Parallel(ctx context.Context, id int64, skus []string) error { // want Parallel:`^acquires locks\.OrderLock$`
	return s.l.WithOrderLock(ctx, id, func(hctx context.Context) error {
		var wg sync.WaitGroup
		for _, sku := range skus {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = s.restock(hctx, sku)
			}()
		}
		wg.Wait()
		return nil
	})
}

// Paired is a Lock and its Unlock with the returned ctx.
func (s *Shop) Paired(ctx context.Context, shop string) error { // want Paired:`^acquires locks\.Catalog$`
	r := s.l.Catalog(shop).Read()
	hctx, err := r.Lock(ctx)
	if err != nil {
		return err
	}
	defer r.Unlock(hctx)
	return nil
}

// Migrate nests the other way round on purpose, and says why.
func (s *Shop) Migrate(ctx context.Context, id int64, sku string) error { // want Migrate:`^acquires locks\.InventoryLock, locks\.OrderLock$`
	return s.l.WithInventoryLock(ctx, sku, func(ctx context.Context) error {
		//lockgen:ignore runs once at deploy, before any Reserve can run
		return s.l.WithOrderLock(ctx, id, func(ctx context.Context) error { return nil })
	})
}

// Detach gives up the hold's identity on purpose, and says why.
func (s *Shop) Detach(ctx context.Context, id int64) error { // want Detach:`^acquires locks\.OrderLock$`
	return s.l.WithOrderLock(ctx, id, func(hctx context.Context) error {
		go s.wait(hctx) //lockgen:ignore wait only watches for cancellation
		go s.wait(hctx) //lockgen:ignore // want `//lockgen:ignore needs a reason` `^hctx, the hold.s ctx, escapes its critical section into a goroutine`
		return nil
	})
}

func (s *Shop) wait(ctx context.Context) { <-ctx.Done() }

type reserver interface {
	Reserve(ctx context.Context, id int64, sku string) error
}

// twice is generic: its instances share its summary.
func twice[T any](ctx context.Context, s *Shop, id int64, sku string, _ T) error {
	if err := s.Reserve(ctx, id, sku); err != nil {
		return err
	}
	return s.Reserve(ctx, id, sku)
}

// Generic takes InventoryLock under OrderLock through a generic helper (the
// usual order), and calls an interface whose implementation is unknown.
func (s *Shop) Generic(ctx context.Context, id int64, sku string, r reserver) error { // want Generic:`^acquires locks\.InventoryLock, locks\.OrderLock$`
	return s.l.WithOrderLock(ctx, id, func(ctx context.Context) error {
		if err := twice(ctx, s, id, sku, 1); err != nil {
			return err
		}
		return r.Reserve(ctx, id, sku)
	})
}
