// want package:`order locks\.InventoryLock>locks\.OrderLock locks\.InventoryLock>locks\.PaymentLock locks\.OrderLock>locks\.InventoryLock locks\.PaymentLock>locks\.InventoryLock locks\.ReportLock>locks\.OrderLock\}$`

// Package methodexpr takes locks through method expressions of the
// generated helpers and handles: the receiver is the first argument.
package methodexpr

import (
	"context"

	"example.com/vettest/locks"
	"github.com/lockgen/lockgen/runtime"
)

// A takes InventoryLock while OrderLock is held, through a method expression.
func A(ctx context.Context, l *locks.Locks, id int64, sku string) error { // want A:`^acquires locks\.InventoryLock, locks\.OrderLock$`
	return (*locks.Locks).WithOrderLock(l, ctx, id, func(hctx context.Context) error {
		return l.WithInventoryLock(hctx, sku, func(context.Context) error { return nil }) // want `^lock-order inversion: locks.InventoryLock is taken while locks.OrderLock is held`
	})
}

func B(ctx context.Context, l *locks.Locks, id int64, sku string) error { // want B:`^acquires locks\.InventoryLock, locks\.OrderLock$`
	return l.WithInventoryLock(ctx, sku, func(hctx context.Context) error {
		return l.WithOrderLock(hctx, id, func(context.Context) error { return nil }) // want `^lock-order inversion: locks.OrderLock is taken while locks.InventoryLock is held`
	})
}

// C passes the hold's ctx, after the receiver: no finding.
func C(ctx context.Context, l *locks.Locks, id int64) error { // want C:`^acquires locks\.OrderLock, locks\.ReportLock$`
	return l.WithReportLock(ctx, id, func(hctx context.Context) error {
		return (*locks.Locks).WithOrderLock(l, hctx, id, func(context.Context) error { return nil })
	})
}

// D runs a handle's Do through a method expression.
func D(ctx context.Context, l *locks.Locks, sku string) error { // want D:`^acquires locks\.InventoryLock, locks\.PaymentLock$`
	return (*runtime.Mutex).Do(l.InventoryLock(sku), ctx, func(hctx context.Context) error {
		return l.WithPaymentLock(hctx, sku, func(context.Context) error { return nil }) // want `^lock-order inversion: locks.PaymentLock is taken while locks.InventoryLock is held`
	})
}

func E(ctx context.Context, l *locks.Locks, sku string) error { // want E:`^acquires locks\.InventoryLock, locks\.PaymentLock$`
	return l.WithPaymentLock(ctx, sku, func(hctx context.Context) error {
		return l.WithInventoryLock(hctx, sku, func(context.Context) error { return nil }) // want `^lock-order inversion: locks.InventoryLock is taken while locks.PaymentLock is held`
	})
}
