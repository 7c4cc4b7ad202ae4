// Package unlock releases locks with a ctx no Lock returned.
package unlock

import (
	"context"

	"example.com/vettest/locks"
)

func InputCtx(ctx context.Context, l *locks.Locks, id int64) error { // want InputCtx:`^acquires locks\.OrderLock$`
	m := l.OrderLock(id)
	if _, err := m.Lock(ctx); err != nil {
		return err
	}
	return m.Unlock(ctx) // want `^Unlock with ctx, the ctx passed to Lock, not the one it returned \(hctx, err := m.Lock\(ctx\); defer m.Unlock\(hctx\)\)$`
}

func Background(ctx context.Context, l *locks.Locks, id int64) error { // want Background:`^acquires locks\.OrderLock$`
	m := l.OrderLock(id)
	if _, err := m.Lock(ctx); err != nil {
		return err
	}
	return m.Unlock(context.Background()) // want `^Unlock with context.Background\(\), which carries no hold, fails with runtime.ErrNotHeld`
}

func OtherHandle(ctx context.Context, l *locks.Locks, id int64, sku string) error { // want OtherHandle:`^acquires locks\.InventoryLock, locks\.OrderLock$`
	order := l.OrderLock(id)
	hctx, err := order.Lock(ctx)
	if err != nil {
		return err
	}
	stock := l.InventoryLock(sku)
	if _, err := stock.TryLock(hctx, 0, 0); err != nil {
		return err
	}
	defer stock.Unlock(hctx) // want `^Unlock with hctx, the hold of another lock`
	return order.Unlock(hctx)
}

// Paired locks and unlocks, and a helper that unlocks a hold it is
// given: nothing to report.
func Paired(ctx context.Context, l *locks.Locks, id int64, shop string) error { // want Paired:`^acquires locks\.Catalog, locks\.OrderLock$`
	m := l.OrderLock(id)
	hctx, err := m.Lock(ctx)
	if err != nil {
		return err
	}
	defer m.Unlock(hctx)
	w := l.Catalog(shop).Write()
	wctx, err := w.TryLock(hctx, 0, 0)
	if err != nil {
		return err
	}
	return release(l, shop, wctx)
}

func release(l *locks.Locks, shop string, hctx context.Context) error {
	return l.Catalog(shop).Write().Unlock(hctx)
}

// UsedAfterUnlock takes another lock with a hold's ctx after the Unlock
// that released the hold.
func UsedAfterUnlock(ctx context.Context, l *locks.Locks, id int64, sku string) error { // want UsedAfterUnlock:`^acquires locks\.InventoryLock, locks\.OrderLock$`
	m := l.OrderLock(id)
	hctx, err := m.Lock(ctx)
	if err != nil {
		return err
	}
	_ = m.Unlock(hctx)
	return l.WithInventoryLock(hctx, sku, func(context.Context) error { return nil }) // want `^hctx, the hold's ctx, is used after its Unlock released the lock: it still carries that hold's identity \(use ctx, the ctx the Lock was given\)$`
}

// UnlockedInABranch releases in one branch only and uses the hold in the
// other: no finding.
func UnlockedInABranch(ctx context.Context, l *locks.Locks, id int64, sku string) error { // want UnlockedInABranch:`^acquires locks\.InventoryLock, locks\.OrderLock$`
	m := l.OrderLock(id)
	hctx, err := m.Lock(ctx)
	if err != nil {
		return err
	}
	if sku == "" {
		return m.Unlock(hctx)
	}
	defer m.Unlock(hctx)
	return l.WithInventoryLock(hctx, sku, func(context.Context) error { return nil })
}

// UnlockedOnAnotherHandle releases through another handle, which does
// not release this hold: no finding for the later use.
func UnlockedOnAnotherHandle(ctx context.Context, l *locks.Locks, id int64, sku string) error { // want UnlockedOnAnotherHandle:`^acquires locks\.InventoryLock, locks\.OrderLock$`
	m, other := l.OrderLock(id), l.OrderLock(id+1)
	hctx, err := m.Lock(ctx)
	if err != nil {
		return err
	}
	_ = other.Unlock(hctx)
	defer m.Unlock(hctx)
	return l.WithInventoryLock(hctx, sku, func(context.Context) error { return nil })
}
