// want package:`order locks\.OrderLock>locks\.InventoryLock\}$`

// Package a takes OrderLock, then InventoryLock. It does not see package
// b, which imports it, so the inversion is reported in b (lockgen vet
// reports it here too).
package a

import (
	"context"

	"example.com/vettest/locks"
)

func Reserve(ctx context.Context, l *locks.Locks, id int64, sku string) error { // want Reserve:`^acquires locks\.InventoryLock, locks\.OrderLock$`
	return l.WithOrderLock(ctx, id, func(ctx context.Context) error {
		return l.WithInventoryLock(ctx, sku, func(ctx context.Context) error { return nil })
	})
}
