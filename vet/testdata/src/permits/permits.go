// want package:`order locks\.InventoryLock>locks\.PaymentSlots locks\.OrderLock>locks\.PaymentSlots locks\.PaymentSlots>locks\.InventoryLock locks\.PaymentSlots>locks\.OrderLock runtime\."exports">locks\.OrderLock\}$`

// Package permits takes semaphores (generated and runtime) and latches
// around locks.
package permits

import (
	"context"

	"example.com/vettest/locks"
	"github.com/lockgen/lockgen/runtime"
)

func Charge(ctx context.Context, l *locks.Locks, id int64, shop string) error { // want Charge:`^acquires locks\.OrderLock, locks\.PaymentSlots$`
	return l.WithOrderLock(ctx, id, func(hctx context.Context) error {
		return l.WithPaymentSlots(hctx, shop, func(context.Context) error { return nil }) // want `^lock-order inversion: locks.PaymentSlots is taken while locks.OrderLock is held, and elsewhere the other way round \(take locks.OrderLock and locks.PaymentSlots in one order everywhere: a semaphore cannot be a multi lock member\)$`
	})
}

func Settle(ctx context.Context, l *locks.Locks, id int64, shop string) error { // want Settle:`^acquires locks\.OrderLock, locks\.PaymentSlots$`
	return l.WithPaymentSlots(ctx, shop, func(pctx context.Context) error {
		return l.WithOrderLock(pctx, id, func(context.Context) error { return nil }) // want `lock-order inversion: locks.OrderLock is taken while locks.PaymentSlots is held`
	})
}

func OuterCtx(ctx context.Context, l *locks.Locks, sku, shop string) error { // want OuterCtx:`^acquires locks\.InventoryLock, locks\.PaymentSlots$`
	return l.WithInventoryLock(ctx, sku, func(hctx context.Context) error {
		return l.WithPaymentSlots(ctx, shop, func(context.Context) error { return nil }) // want `^the semaphore locks.PaymentSlots is taken with ctx inside the critical section of locks.InventoryLock: pass hctx, the hold's ctx$` `lock-order inversion: locks.PaymentSlots is taken while locks.InventoryLock is held`
	})
}

func AnotherPermit(ctx context.Context, l *locks.Locks, shop string) error { // want AnotherPermit:`^acquires locks\.PaymentSlots$`
	return l.WithPaymentSlots(ctx, shop, func(pctx context.Context) error {
		return l.WithPaymentSlots(ctx, shop, func(context.Context) error { return nil }) // want `^the semaphore locks.PaymentSlots is taken with ctx inside the critical section of locks.PaymentSlots: pass pctx`
	})
}

func Handle(ctx context.Context, l *locks.Locks, shop, sku string) error { // want Handle:`^acquires locks\.InventoryLock, locks\.PaymentSlots$`
	s := l.PaymentSlots(shop)
	pctx, err := s.Acquire(ctx, 1)
	if err != nil {
		return err
	}
	defer s.Release(pctx)
	return s.Do(pctx, func(hctx context.Context) error {
		return l.WithInventoryLock(hctx, sku, func(context.Context) error { return nil }) // want `lock-order inversion: locks.InventoryLock is taken while locks.PaymentSlots is held`
	})
}

func WrongRelease(ctx context.Context, l *locks.Locks, shop string) error { // want WrongRelease:`^acquires locks\.PaymentSlots$`
	s := l.PaymentSlots(shop)
	pctx, err := s.TryAcquire(ctx, 2, 0)
	if err != nil {
		return err
	}
	_ = pctx
	return s.Release(ctx) // want `^Release with ctx, the ctx passed to Acquire, not the one it returned \(hctx, err := s.Acquire\(ctx, 1\); defer s.Release\(hctx\)\)$`
}

func Direct(ctx context.Context, c *runtime.Client, l *locks.Locks, id int64) error { // want Direct:`^acquires locks\.OrderLock, runtime\."exports"$`
	return c.Semaphore("exports", runtime.SemaphoreOptions{Name: "Exports"}).Do(ctx, func(hctx context.Context) error {
		return l.WithOrderLock(hctx, id, func(context.Context) error { return nil })
	})
}

// Await inside a lock is a wait, not a lock: no edge, no finding.
func Await(ctx context.Context, l *locks.Locks, id int64, batch string) error { // want Await:`^acquires locks\.OrderLock$`
	return l.WithOrderLock(ctx, id, func(hctx context.Context) error {
		return l.AwaitImportDone(ctx, batch)
	})
}

func Escape(ctx context.Context, l *locks.Locks, shop string, out chan<- context.Context) error { // want Escape:`^acquires locks\.PaymentSlots$`
	return l.WithPaymentSlots(ctx, shop, func(pctx context.Context) error {
		out <- pctx // want `^pctx, the hold's ctx, escapes its critical section: sent on a channel`
		return nil
	})
}
