// want package:`order locks\.LedgerLock>locks\.InventoryLock locks\.LedgerLock>locks\.OrderLock locks\.LedgerLock>locks\.OrderLock locks\.OrderLock>locks\.LedgerLock locks\.OrderLock>locks\.PointLedger locks\.PointLedger>locks\.OrderLock runtime\."books:main">runtime\."journal:main" runtime\."journal:main">runtime\."books:main"\}$`

// Package fenced takes a fenced lock through its generated With<Name>
// (whose fn also gets the token), its handle's fenced and plain methods,
// and a runtime handle made on the Client.
package fenced

import (
	"context"
	"time"

	"example.com/vettest/locks"
	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/testdata/usertypes/domain"
)

func Post(ctx context.Context, l *locks.Locks, id int64) error { // want Post:`^acquires locks\.LedgerLock, locks\.OrderLock$`
	return l.WithLedgerLock(ctx, id, func(hctx context.Context, fence int64) error {
		return l.WithOrderLock(hctx, id, func(context.Context) error { return nil }) // want `lock-order inversion: locks.OrderLock is taken while locks.LedgerLock is held`
	})
}

func Refund(ctx context.Context, l *locks.Locks, id int64) error { // want Refund:`^acquires locks\.LedgerLock, locks\.OrderLock$`
	return l.WithOrderLock(ctx, id, func(hctx context.Context) error {
		return l.LedgerLock(id).DoFenced(hctx, func(ctx context.Context, fence int64) error { return nil }) // want `lock-order inversion: locks.LedgerLock is taken while locks.OrderLock is held`
	})
}

func OuterCtx(ctx context.Context, l *locks.Locks, id int64, sku string) error { // want OuterCtx:`^acquires locks\.InventoryLock, locks\.LedgerLock$`
	return l.WithLedgerLock(ctx, id, func(hctx context.Context, fence int64) error {
		return l.WithInventoryLock(ctx, sku, func(context.Context) error { return nil }) // want `^locks.InventoryLock is taken with ctx inside the critical section of locks.LedgerLock: pass hctx`
	})
}

func SelfDeadlock(ctx context.Context, l *locks.Locks, id int64) error { // want SelfDeadlock:`^acquires locks\.LedgerLock$`
	return l.WithLedgerLock(ctx, id, func(hctx context.Context, fence int64) error {
		_, _, err := l.LedgerLock(id).TryLockFenced(ctx, 0, 0) // want `^self-deadlock: locks.LedgerLock is taken again with ctx while this goroutine holds it`
		return err
	})
}

func Reentry(ctx context.Context, l *locks.Locks, id int64) error { // want Reentry:`^acquires locks\.LedgerLock$`
	return l.WithLedgerLock(ctx, id, func(hctx context.Context, fence int64) error {
		held, token, err := l.LedgerLock(id).LockFenced(hctx)
		if err != nil {
			return err
		}
		_ = token
		return l.LedgerLock(id).Unlock(held)
	})
}

func WrongUnlock(ctx context.Context, l *locks.Locks, id int64) error { // want WrongUnlock:`^acquires locks\.LedgerLock$`
	f := l.LedgerLock(id)
	held, _, err := f.LockFenced(ctx)
	if err != nil {
		return err
	}
	_ = held
	return f.Unlock(ctx) // want `^Unlock with ctx, the ctx passed to Lock`
}

func Embedded(ctx context.Context, l *locks.Locks, id int64) error { // want Embedded:`^acquires locks\.LedgerLock, locks\.OrderLock$`
	return l.LedgerLock(id).Do(ctx, func(hctx context.Context) error {
		return l.WithOrderLock(context.Background(), id, func(context.Context) error { return nil }) // want `lock-order inversion: locks.OrderLock is taken while locks.LedgerLock is held` `^locks.OrderLock is taken with context.Background\(\) inside the critical section of locks.LedgerLock`
	})
}

func Direct(ctx context.Context, c *runtime.Client) error { // want Direct:`^acquires runtime\."books:main", runtime\."journal:main"$`
	return c.FencedLock("journal:main", runtime.LockOptions{Name: "Journal"}).DoFenced(ctx, func(hctx context.Context, fence int64) error {
		return c.Mutex("books:main", runtime.LockOptions{WaitTime: time.Second}).Do(hctx, func(context.Context) error { return nil }) // want `lock-order inversion: runtime."books:main" is taken while runtime."journal:main" is held`
	})
}

func DirectBack(ctx context.Context, c *runtime.Client) error { // want DirectBack:`^acquires runtime\."books:main", runtime\."journal:main"$`
	return c.Mutex("books:main", runtime.LockOptions{}).Do(ctx, func(hctx context.Context) error {
		_, _, err := c.FencedLock("journal:main", runtime.LockOptions{Name: "Journal"}).LockFenced(hctx) // want `lock-order inversion: runtime."journal:main" is taken while runtime."books:main" is held`
		return err
	})
}

// A lock whose params can fail to render: its constructor returns (handle, error).
func PointFirst(ctx context.Context, l *locks.Locks, p domain.Point, id int64) error { // want PointFirst:`^acquires locks\.OrderLock, locks\.PointLedger$`
	m, err := l.PointLedger(p)
	if err != nil {
		return err
	}
	return m.DoFenced(ctx, func(hctx context.Context, fence int64) error {
		return l.WithOrderLock(hctx, id, func(context.Context) error { return nil }) // want `lock-order inversion: locks.OrderLock is taken while locks.PointLedger is held`
	})
}

func OrderFirst(ctx context.Context, l *locks.Locks, p domain.Point, id int64) error { // want OrderFirst:`^acquires locks\.OrderLock, locks\.PointLedger$`
	return l.WithOrderLock(ctx, id, func(hctx context.Context) error {
		return l.WithPointLedger(hctx, p, func(context.Context, int64) error { return nil }) // want `lock-order inversion: locks.PointLedger is taken while locks.OrderLock is held`
	})
}
