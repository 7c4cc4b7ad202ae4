// want package:`order locks\.InventoryLock>locks\.OrderLock locks\.OrderLock>locks\.InventoryLock locks\.PaymentSlots>locks\.InventoryLock\}$`

// Package trylock backs off instead of waiting: a TryLock or TryAcquire
// with a constant wait of 0, taken while another lock is held, never
// waits, so it cannot close a deadlock cycle and is no lock-order edge.
// A wait other than 0 is one.
package trylock

import (
	"context"

	"example.com/vettest/locks"
	"github.com/lockgen/lockgen/runtime"
)

type S struct{ l *locks.Locks }

// A takes OrderLock, then InventoryLock.
func (s *S) A(ctx context.Context, id int64, sku string) error { // want A:`^acquires locks\.InventoryLock, locks\.OrderLock$`
	return s.l.WithOrderLock(ctx, id, func(hctx context.Context) error {
		return s.l.WithInventoryLock(hctx, sku, func(context.Context) error { return nil }) // want `^lock-order inversion: locks.InventoryLock is taken while locks.OrderLock is held`
	})
}

// P takes a PaymentSlots permit, then InventoryLock.
func (s *S) P(ctx context.Context, sku, shop string) error { // want P:`^acquires locks\.InventoryLock, locks\.PaymentSlots$`
	return s.l.WithPaymentSlots(ctx, shop, func(hctx context.Context) error {
		return s.l.WithInventoryLock(hctx, sku, func(context.Context) error { return nil })
	})
}

// B holds InventoryLock and only tries OrderLock: busy, it skips a round.
func (s *S) B(ctx context.Context, id int64, sku string) error { // want B:`^acquires locks\.InventoryLock, locks\.OrderLock$`
	return s.l.WithInventoryLock(ctx, sku, func(hctx context.Context) error {
		m := s.l.OrderLock(id)
		h, err := m.TryLock(hctx, 0, runtime.Watchdog)
		if err != nil {
			return nil
		}
		return m.Unlock(h)
	})
}

// C holds InventoryLock and only tries for a permit.
func (s *S) C(ctx context.Context, sku, shop string) error { // want C:`^acquires locks\.InventoryLock, locks\.PaymentSlots$`
	return s.l.WithInventoryLock(ctx, sku, func(hctx context.Context) error {
		sem := s.l.PaymentSlots(shop)
		h, err := sem.TryAcquire(hctx, 1, 0)
		if err != nil {
			return nil
		}
		return sem.Release(h)
	})
}

// D waits for OrderLock under InventoryLock: an inversion of A's order.
func (s *S) D(ctx context.Context, id int64, sku string) error { // want D:`^acquires locks\.InventoryLock, locks\.OrderLock$`
	return s.l.WithInventoryLock(ctx, sku, func(hctx context.Context) error {
		m := s.l.OrderLock(id)
		h, err := m.TryLock(hctx, 100, runtime.Watchdog) // want `^lock-order inversion: locks.OrderLock is taken while locks.InventoryLock is held`
		if err != nil {
			return nil
		}
		return m.Unlock(h)
	})
}

// E holds ReportLock and takes ExportLock; F the other way round. Both are
// declared waitTime: 0, so their With<Name> and their handle's Do try
// once, like TryLock(ctx, 0, …): neither waits, so there is no cycle.
func (s *S) E(ctx context.Context, id int64) error { // want E:`^acquires locks\.ExportLock, locks\.ReportLock$`
	return s.l.WithReportLock(ctx, id, func(hctx context.Context) error {
		return s.l.WithExportLock(hctx, id, func(context.Context) error { return nil })
	})
}

func (s *S) F(ctx context.Context, id int64) error { // want F:`^acquires locks\.ExportLock, locks\.ReportLock$`
	return s.l.ExportLock(id).Do(ctx, func(hctx context.Context) error {
		return s.l.ReportLock(id).Do(hctx, func(context.Context) error { return nil })
	})
}
