// want package:`order locks\.InventoryLock>locks\.OrderLock locks\.OrderLock>locks\.InventoryLock\}$`

// Package order inverts the order of two locks within one function.
package order

import (
	"context"

	"example.com/vettest/locks"
)

func Both(ctx context.Context, l *locks.Locks, id int64, sku string) error { // want Both:`^acquires locks\.InventoryLock, locks\.OrderLock$`
	err := l.WithOrderLock(ctx, id, func(ctx context.Context) error {
		return l.WithInventoryLock(ctx, sku, func(ctx context.Context) error { return nil }) // want `lock-order inversion: locks.InventoryLock is taken while locks.OrderLock is held \(taken at .*order.go:13:9\), and locks.OrderLock is taken while locks.InventoryLock is held at .*order.go:20:10: two callers can each hold one and wait for the other`
	})
	if err != nil {
		return err
	}
	return l.WithInventoryLock(ctx, sku, func(ctx context.Context) error {
		return l.WithOrderLock(ctx, id, func(ctx context.Context) error { return nil }) // want `lock-order inversion: locks.OrderLock is taken while locks.InventoryLock is held`
	})
}
