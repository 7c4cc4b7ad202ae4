// want package:`order locks\.InventoryLock>locks\.OrderLock locks\.OrderLock>locks\.InventoryLock\}$`

// Package alias names the runtime's handle type by an alias.
package alias

import (
	"context"

	"example.com/vettest/locks"
	"github.com/lockgen/lockgen/runtime"
)

type Mutex = runtime.Mutex

// A holds OrderLock through a handle whose type is written as the alias.
func A(ctx context.Context, l *locks.Locks, id int64, sku string) error { // want A:`^acquires locks\.InventoryLock, locks\.OrderLock$`
	var m *Mutex = l.OrderLock(id)
	return m.Do(ctx, func(hctx context.Context) error {
		return l.WithInventoryLock(hctx, sku, func(context.Context) error { return nil }) // want `^lock-order inversion: locks.InventoryLock is taken while locks.OrderLock is held`
	})
}

func B(ctx context.Context, l *locks.Locks, id int64, sku string) error { // want B:`^acquires locks\.InventoryLock, locks\.OrderLock$`
	return l.WithInventoryLock(ctx, sku, func(hctx context.Context) error {
		return l.WithOrderLock(hctx, id, func(context.Context) error { return nil }) // want `^lock-order inversion: locks.OrderLock is taken while locks.InventoryLock is held`
	})
}
