// want package:`order runtime\."cfg">runtime\."other" runtime\."other">runtime\."cfg"\}$`

// Package rtname takes the config lock by its constant key, with a Name in
// its options, and by a computed key with the same Name: one lock.
package rtname

import (
	"context"
	"time"

	"github.com/lockgen/lockgen/runtime"
)

const cfgKey = "cfg"

func P(ctx context.Context, c *runtime.Client) error { // want P:`^acquires runtime\."cfg", runtime\."other"$`
	return c.Mutex(cfgKey, runtime.LockOptions{Name: "Config", WaitTime: time.Second}).Do(ctx, func(ctx context.Context) error {
		return c.Mutex("other", runtime.LockOptions{WaitTime: time.Second}).Do(ctx, work) // want `^lock-order inversion: runtime."other" is taken while runtime."cfg" is held`
	})
}

// Q takes "other", then the config lock through a key it is given.
func Q(ctx context.Context, c *runtime.Client, key string) error { // want Q:`^acquires runtime\."cfg", runtime\."other"$`
	return c.Mutex("other", runtime.LockOptions{WaitTime: time.Second}).Do(ctx, func(ctx context.Context) error {
		return c.Mutex(key, runtime.LockOptions{Name: "Config", WaitTime: time.Second}).Do(ctx, work) // want `^lock-order inversion: runtime."cfg" is taken while runtime."other" is held`
	})
}

func work(context.Context) error { return nil }
