// want package:`order locks\.InventoryLock>locks\.OrderLock locks\.OrderLock>locks\.InventoryLock\}$`

// Package pkgvar declares its handlers as func literals in package-level
// variables (a command's RunE, a handler table): their bodies are checked
// as a function's are.
package pkgvar

import (
	"context"

	"example.com/vettest/locks"
)

var L *locks.Locks

var Transfer = func(ctx context.Context, id int64, sku string) error {
	return L.WithOrderLock(ctx, id, func(hctx context.Context) error {
		return L.WithInventoryLock(hctx, sku, func(context.Context) error { return nil }) // want `^lock-order inversion: locks.InventoryLock is taken while locks.OrderLock is held`
	})
}

var Handlers = map[string]func(ctx context.Context, id int64, sku string) error{
	"restock": func(ctx context.Context, id int64, sku string) error {
		return L.WithInventoryLock(ctx, sku, func(hctx context.Context) error {
			return L.WithOrderLock(ctx, id, func(context.Context) error { return nil }) // want `^lock-order inversion: locks.OrderLock is taken while locks.InventoryLock is held` `^locks.OrderLock is taken with ctx inside the critical section of locks.InventoryLock: pass hctx`
		})
	},
}
