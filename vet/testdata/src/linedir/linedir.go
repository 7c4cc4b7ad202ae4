// want package:`order locks\.InventoryLock>locks\.OrderLock locks\.OrderLock>locks\.InventoryLock\}$`

// Package linedir is generated from a template and keeps //line
// directives pointing into it, as goyacc, templ or ragel output does:
// findings and their notes are at the template's lines, and a
// //lockgen:ignore on a line of its own still silences the next line.
package linedir

import (
	"context"

	"example.com/vettest/locks"
)

//line handlers.tmpl:1
func A(ctx context.Context, l *locks.Locks, id int64, sku string) error { // want A:`^acquires locks\.InventoryLock, locks\.OrderLock$`
	return l.WithOrderLock(ctx, id, func(hctx context.Context) error {
		return l.WithInventoryLock(hctx, sku, func(context.Context) error { return nil }) // want `^lock-order inversion: locks.InventoryLock is taken while locks.OrderLock is held`
	})
}

//line handlers.tmpl:100
func B(ctx context.Context, l *locks.Locks, id int64, sku string) error { // want B:`^acquires locks\.InventoryLock, locks\.OrderLock$`
	return l.WithInventoryLock(ctx, sku, func(hctx context.Context) error {
		return l.WithOrderLock(hctx, id, func(context.Context) error { return nil }) // want `^lock-order inversion: locks.OrderLock is taken while locks.InventoryLock is held`
	})
}

//line handlers.tmpl:200
func C(ctx context.Context, l *locks.Locks, id int64, sku string) error { // want C:`^acquires locks\.OrderLock, locks\.PaymentLock$`
	return l.WithOrderLock(ctx, id, func(hctx context.Context) error {
		//lockgen:ignore runs alone at deploy
		return l.WithPaymentLock(ctx, sku, func(context.Context) error { return nil })
	})
}
