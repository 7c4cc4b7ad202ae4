// want package:`order locks\.InventoryLock>locks\.OrderLock locks\.OrderLock>locks\.InventoryLock\}$`

// Package b takes InventoryLock, then OrderLock: the other way round from
// package a, which it imports.
package b

import (
	"context"

	"example.com/vettest/cross/a"
	"example.com/vettest/locks"
)

func Restock(ctx context.Context, l *locks.Locks, id int64, sku string) error { // want Restock:`^acquires locks\.InventoryLock, locks\.OrderLock$`
	if err := a.Reserve(ctx, l, id, sku); err != nil {
		return err
	}
	return l.WithInventoryLock(ctx, sku, func(ctx context.Context) error {
		return l.WithOrderLock(ctx, id, func(ctx context.Context) error { return nil }) // want `^lock-order inversion: locks.OrderLock is taken while locks.InventoryLock is held, and elsewhere the other way round`
	})
}
