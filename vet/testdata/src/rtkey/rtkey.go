// want package:`order runtime\."cfg">runtime\."jobs" runtime\."jobs">runtime\."cfg"\}$`

// Package rtkey takes the lock on key "cfg" with and without a Name in
// its options: one Redis key, one lock.
package rtkey

import (
	"context"
	"time"

	"github.com/lockgen/lockgen/runtime"
)

func X(ctx context.Context, c *runtime.Client) error { // want X:`^acquires runtime\."cfg", runtime\."jobs"$`
	return c.Mutex("cfg", runtime.LockOptions{Name: "Config"}).Do(ctx, func(hctx context.Context) error {
		return c.Mutex("jobs", runtime.LockOptions{WaitTime: time.Second}).Do(hctx, func(context.Context) error { return nil }) // want `^lock-order inversion: runtime."jobs" is taken while runtime."cfg" is held`
	})
}

func Y(ctx context.Context, c *runtime.Client) error { // want Y:`^acquires runtime\."cfg", runtime\."jobs"$`
	return c.Mutex("jobs", runtime.LockOptions{}).Do(ctx, func(hctx context.Context) error {
		return c.Mutex("cfg", runtime.LockOptions{WaitTime: time.Second}).Do(hctx, func(context.Context) error { return nil }) // want `^lock-order inversion: runtime."cfg" is taken while runtime."jobs" is held`
	})
}

// Named's key is computed, but its options' Name is seen with the
// constant key "cfg" in X: it is that lock.
func Named(ctx context.Context, c *runtime.Client, key string) error { // want Named:`^acquires runtime\."cfg"$`
	return c.Mutex(key, runtime.LockOptions{Name: "Config"}).Do(ctx, func(context.Context) error { return nil })
}

// Audit is known by its options' Name alone: no constant key goes with it.
func Audit(ctx context.Context, c *runtime.Client, key string) error { // want Audit:`^acquires runtime\.Audit$`
	return c.Mutex(key, runtime.LockOptions{Name: "Audit"}).Do(ctx, func(context.Context) error { return nil })
}
