// want package:`order locks\.InventoryLock>locks\.OrderLock locks\.OrderLock>locks\.InventoryLock\}$`

// Package value gets a result out of a critical section with
// runtime.Value(ctx, handle.Do, fn), as README.md and the generated
// With<Name> docs recommend: fn runs under the handle's lock.
package value

import (
	"context"

	"example.com/vettest/locks"
	"github.com/lockgen/lockgen/runtime"
)

// Reserve takes InventoryLock while OrderLock is held.
func Reserve(ctx context.Context, l *locks.Locks, id int64, sku string) (int64, error) { // want Reserve:`^acquires locks\.InventoryLock, locks\.OrderLock$`
	return runtime.Value(ctx, l.OrderLock(id).Do, func(hctx context.Context) (int64, error) {
		return 1, l.WithInventoryLock(hctx, sku, func(context.Context) error { return nil }) // want `^lock-order inversion: locks.InventoryLock is taken while locks.OrderLock is held`
	})
}

// Restock takes OrderLock while InventoryLock is held, with the outer ctx.
func Restock(ctx context.Context, l *locks.Locks, id int64, sku string) (int64, error) { // want Restock:`^acquires locks\.InventoryLock, locks\.OrderLock$`
	return runtime.Value(ctx, l.InventoryLock(sku).Do, func(hctx context.Context) (int64, error) {
		return 2, l.WithOrderLock(ctx, id, func(context.Context) error { return nil }) // want `^lock-order inversion: locks.OrderLock is taken while locks.InventoryLock is held` `^locks.OrderLock is taken with ctx inside the critical section of locks.InventoryLock: pass hctx`
	})
}
