// want package:`order locks\.InventoryLock>locks\.OrderLock locks\.OrderLock>locks\.InventoryLock\}$`

// Package helper inverts an order through helper functions: the inner
// lock is taken by a function called inside the critical section.
package helper

import (
	"context"

	"example.com/vettest/locks"
)

type Service struct{ l *locks.Locks }

// reserve takes InventoryLock.
func (s *Service) reserve(ctx context.Context, sku string) error {
	return s.l.WithInventoryLock(ctx, sku, func(ctx context.Context) error { return nil })
}

// touch takes OrderLock two calls down.
func (s *Service) touch(ctx context.Context, id int64) error { return s.touchOrder(ctx, id) }

func (s *Service) touchOrder(ctx context.Context, id int64) error {
	return s.l.WithOrderLock(ctx, id, func(ctx context.Context) error { return nil })
}

func (s *Service) Place(ctx context.Context, id int64, sku string) error { // want Place:`^acquires locks\.InventoryLock, locks\.OrderLock$`
	return s.l.WithOrderLock(ctx, id, func(ctx context.Context) error {
		return s.reserve(ctx, sku) // want `^lock-order inversion: locks.InventoryLock is taken while locks.OrderLock is held, and elsewhere the other way round`
	})
}

func (s *Service) Restock(ctx context.Context, id int64, sku string) error { // want Restock:`^acquires locks\.InventoryLock, locks\.OrderLock$`
	return s.l.WithInventoryLock(ctx, sku, func(ctx context.Context) error {
		return s.touch(ctx, id) // want `^lock-order inversion: locks.OrderLock is taken while locks.InventoryLock is held`
	})
}
