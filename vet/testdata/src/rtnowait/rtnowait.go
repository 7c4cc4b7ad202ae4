// want package:`order runtime\.C>runtime\.D runtime\.D>runtime\.C\}$`

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

func X(ctx context.Context, c *runtime.Client) error { // want X:`^acquires runtime\.A, runtime\.B$`
	return c.Mutex("a", runtime.LockOptions{Name: "A", WaitTime: 0}).Do(ctx, func(hctx context.Context) error {
		return c.Mutex("b", runtime.LockOptions{Name: "B", WaitTime: 0}).Do(hctx, func(context.Context) error { return nil })
	})
}

func Y(ctx context.Context, c *runtime.Client) error { // want Y:`^acquires runtime\.A, runtime\.B$`
	return c.Mutex("b", runtime.LockOptions{Name: "B"}).Do(ctx, func(hctx context.Context) error {
		return c.Mutex("a", runtime.LockOptions{Name: "A"}).Do(hctx, func(context.Context) error { return nil })
	})
}

// Z and W wait: a WaitTime other than 0, and a Lock.
func Z(ctx context.Context, c *runtime.Client) error { // want Z:`^acquires runtime\.C, runtime\.D$`
	return c.Mutex("c", runtime.LockOptions{Name: "C"}).Do(ctx, func(hctx context.Context) error {
		return c.Mutex("d", runtime.LockOptions{Name: "D", WaitTime: time.Second}).Do(hctx, func(context.Context) error { return nil }) // want `^lock-order inversion: runtime.D is taken while runtime.C is held`
	})
}

func W(ctx context.Context, c *runtime.Client) error { // want W:`^acquires runtime\.C, runtime\.D$`
	return c.Mutex("d", runtime.LockOptions{Name: "D"}).Do(ctx, func(hctx context.Context) error {
		m := c.Mutex("c", runtime.LockOptions{Name: "C"})
		h, err := m.Lock(hctx) // want `^lock-order inversion: runtime.C is taken while runtime.D is held`
		if err != nil {
			return err
		}
		return m.Unlock(h)
	})
}
