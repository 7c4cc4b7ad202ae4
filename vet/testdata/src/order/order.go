// want package:`order locks\.InventoryLock>locks\.OrderLock locks\.OrderLock>locks\.InventoryLock\}$`

// Package order inverts the order of two locks within one function.
package order

import (
	"context"

	"example.com/vettest/locks"
)

func Both(ctx context.Context, l *locks.Locks, id int64, sku string) error { // want Both:`^acquires locks\.InventoryLock, locks\.OrderLock$`
	err := l.WithOrderLock(ctx, id, func(ctx context.Context) error {
		return l.WithInventoryLock(ctx, sku, func(ctx context.Context) error { return nil }) // want `^lock-order inversion: locks.InventoryLock is taken while locks.OrderLock is held, and elsewhere the other way round \(take both in one multi lock, or in one order everywhere\)$`
	})
	if err != nil {
		return err
	}
	return l.WithInventoryLock(ctx, sku, func(ctx context.Context) error {
		return l.WithOrderLock(ctx, id, func(ctx context.Context) error { return nil }) // want `^lock-order inversion: locks.OrderLock is taken while locks.InventoryLock is held, and elsewhere the other way round`
	})
}
