// want package:`order locks\.Catalog>locks\.InventoryLock locks\.Catalog>locks\.OrderLock locks\.InventoryLock>locks\.PaymentLock locks\.OrderLock>locks\.PaymentLock locks\.PaymentLock>locks\.OrderLock\}$`

// Package multi inverts an order through a multi lock's members: a
// checkout holds OrderLock (a member of CheckoutLock) while it takes
// PaymentLock, and a refund takes OrderLock while it holds PaymentLock.
package multi

import (
	"context"

	"example.com/vettest/locks"
)

func Checkout(ctx context.Context, l *locks.Locks, id int64, sku, pay string) error { // want Checkout:`^acquires locks\.InventoryLock, locks\.OrderLock, locks\.PaymentLock$`
	return l.WithCheckoutLock(ctx, id, sku, func(ctx context.Context) error {
		return l.WithPaymentLock(ctx, pay, func(ctx context.Context) error { return nil }) // want `^lock-order inversion: locks.PaymentLock is taken while locks.OrderLock is held, and elsewhere the other way round`
	})
}

// Refund takes a member of the multi lock while it holds PaymentLock.
func Refund(ctx context.Context, l *locks.Locks, id int64, pay string) error { // want Refund:`^acquires locks\.OrderLock, locks\.PaymentLock$`
	return l.WithPaymentLock(ctx, pay, func(ctx context.Context) error {
		return cancelOrder(ctx, l, id) // want `^lock-order inversion: locks.OrderLock is taken while locks.PaymentLock is held`
	})
}

func cancelOrder(ctx context.Context, l *locks.Locks, id int64) error {
	return l.WithOrderLock(ctx, id, func(ctx context.Context) error { return nil })
}

// Handle takes the multi lock through its runtime handle, inside a
// critical section of the catalog: no cycle, no report.
func Handle(ctx context.Context, l *locks.Locks, id int64, sku string) error { // want Handle:`^acquires locks\.Catalog, locks\.InventoryLock, locks\.OrderLock$`
	return l.WithCatalogRead(ctx, "shop", func(hctx context.Context) error {
		m := l.CheckoutLock(id, sku)
		held, err := m.Lock(hctx)
		if err != nil {
			return err
		}
		return m.Unlock(held)
	})
}
