// want package:`order runtime\."journal:main">runtime\."ledger:1" runtime\."ledger:1">runtime\."journal:main"\}$`

// Package direct uses runtime handles without generated code: locks
// named by a constant key, else by their options' Name.
package direct

import (
	"context"
	"time"

	"github.com/lockgen/lockgen/runtime"
)

var (
	ledger  = runtime.LockOptions{Name: "Ledger"}
	journal = "journal:main"
)

func Post(ctx context.Context, c *runtime.Client) error { // want Post:`^acquires runtime\."journal:main", runtime\."ledger:1"$`
	return c.Mutex("ledger:1", runtime.LockOptions{Name: "Ledger"}).Do(ctx, func(hctx context.Context) error {
		return c.Mutex("journal:main", runtime.LockOptions{WaitTime: time.Second}).Do(hctx, func(context.Context) error { return nil }) // want `lock-order inversion: runtime."journal:main" is taken while runtime."ledger:1" is held`
	})
}

func Replay(ctx context.Context, c *runtime.Client) error { // want Replay:`^acquires runtime\."journal:main", runtime\."ledger:1"$`
	j := c.Mutex("journal:main", runtime.LockOptions{})
	return j.Do(ctx, func(hctx context.Context) error {
		l := c.Mutex("ledger:1", runtime.LockOptions{Name: "Ledger"})
		held, err := l.Lock(hctx) // want `lock-order inversion: runtime."ledger:1" is taken while runtime."journal:main" is held`
		if err != nil {
			return err
		}
		return l.Unlock(held)
	})
}

// Computed keys and options in variables are unknown locks: no edges.
func Unknown(ctx context.Context, c *runtime.Client, key string) error {
	return c.Mutex(key, ledger).Do(ctx, func(hctx context.Context) error {
		return c.Mutex(journal, runtime.LockOptions{}).Do(hctx, func(context.Context) error { return nil })
	})
}

// SameKey unlocks through another handle on the same key: the same lock.
func SameKey(ctx context.Context, c *runtime.Client) error { // want SameKey:`^acquires runtime\."ledger:1"$`
	hctx, err := c.Mutex("ledger:1", runtime.LockOptions{Name: "Ledger"}).TryLock(ctx, 0, 0)
	if err != nil {
		return err
	}
	return c.Mutex("ledger:1", runtime.LockOptions{}).Unlock(hctx)
}

// OtherKey unlocks a lock on another key with this one's hold.
func OtherKey(ctx context.Context, c *runtime.Client) error { // want OtherKey:`^acquires runtime\."journal:main"$`
	hctx, err := c.Mutex("journal:main", runtime.LockOptions{}).Lock(ctx)
	if err != nil {
		return err
	}
	return c.Mutex("ledger:2", runtime.LockOptions{}).Unlock(hctx) // want `^Unlock with hctx, the hold of another lock`
}

// Unknowns are handles the analyzer cannot name: their Unlock is not checked against them.
func Unknowns(ctx context.Context, c *runtime.Client, a, b string) error {
	hctx, err := c.Mutex(a, runtime.LockOptions{}).Lock(ctx)
	if err != nil {
		return err
	}
	return c.Mutex(b, runtime.LockOptions{}).Unlock(hctx)
}

// UnknownCtx takes an unknown lock with the outer ctx inside another unknown lock's critical section.
func UnknownCtx(ctx context.Context, c *runtime.Client, a, b string) error {
	return c.Mutex(a, runtime.LockOptions{}).Do(ctx, func(hctx context.Context) error {
		return c.Mutex(b, runtime.LockOptions{}).Do(ctx, func(context.Context) error { return nil }) // want `^a lock is taken with ctx inside the critical section of a lock: pass hctx`
	})
}
