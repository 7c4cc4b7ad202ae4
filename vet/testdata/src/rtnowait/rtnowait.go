// want package:`order runtime\."c">runtime\."d" runtime\."d">runtime\."c"\}$`

// Package rtnowait takes runtime handles whose options leave WaitTime 0
// (written or omitted): their Do tries once (runtime.LockOptions: "0
// tries once"), so, like a generated lock declared waitTime: 0, it is no
// lock-order edge. A handle's Lock waits whatever its options say.
package rtnowait

import (
	"context"
	"time"

	"github.com/lockgen/lockgen/runtime"
)

func X(ctx context.Context, c *runtime.Client) error { // want X:`^acquires runtime\."a", runtime\."b"$`
	return c.Mutex("a", runtime.LockOptions{Name: "A", WaitTime: 0}).Do(ctx, func(hctx context.Context) error {
		return c.Mutex("b", runtime.LockOptions{Name: "B", WaitTime: 0}).Do(hctx, func(context.Context) error { return nil })
	})
}

func Y(ctx context.Context, c *runtime.Client) error { // want Y:`^acquires runtime\."a", runtime\."b"$`
	return c.Mutex("b", runtime.LockOptions{Name: "B"}).Do(ctx, func(hctx context.Context) error {
		return c.Mutex("a", runtime.LockOptions{Name: "A"}).Do(hctx, func(context.Context) error { return nil })
	})
}

// Z and W wait: a WaitTime other than 0, and a Lock.
func Z(ctx context.Context, c *runtime.Client) error { // want Z:`^acquires runtime\."c", runtime\."d"$`
	return c.Mutex("c", runtime.LockOptions{Name: "C"}).Do(ctx, func(hctx context.Context) error {
		return c.Mutex("d", runtime.LockOptions{Name: "D", WaitTime: time.Second}).Do(hctx, func(context.Context) error { return nil }) // want `^lock-order inversion: runtime."d" is taken while runtime."c" is held`
	})
}

func W(ctx context.Context, c *runtime.Client) error { // want W:`^acquires runtime\."c", runtime\."d"$`
	return c.Mutex("d", runtime.LockOptions{Name: "D"}).Do(ctx, func(hctx context.Context) error {
		m := c.Mutex("c", runtime.LockOptions{Name: "C"})
		h, err := m.Lock(hctx) // want `^lock-order inversion: runtime."c" is taken while runtime."d" is held`
		if err != nil {
			return err
		}
		return m.Unlock(h)
	})
}
