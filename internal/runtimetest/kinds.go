package runtimetest

import (
	"context"
	"time"

	"github.com/lockgen/lockgen/runtime"
)

// Locker is what the fault tests need of a handle: Mutex, MultiLock,
// RedLock and FencedLock have it, and a one-permit Semaphore is given it.
type Locker interface {
	TryLock(ctx context.Context, wait, lease time.Duration) (context.Context, error)
	Unlock(ctx context.Context) error
}

// Kind makes a holder's and a waiter's handles for key: the same kind,
// but for a read-write lock, whose cut-off reader a writer waits for.
type Kind struct {
	Name           string
	Holder, Waiter func(c *runtime.Client, key string) Locker
}

// Kinds are every kind whose holds a fault can cut off: the fault matrix
// of the deadline invariant (runtime/faulttest) runs each, and so do
// package runtime's tests of lost holds given back, of Unlock's order and
// of wake-ups after faults.
var Kinds = func() []Kind {
	var ks []Kind
	same := func(name string, f func(c *runtime.Client, key string) Locker) {
		ks = append(ks, Kind{name, f, f})
	}
	o := runtime.LockOptions{}
	same("reentrant", func(c *runtime.Client, key string) Locker { return c.Mutex(key, o) })
	same("fair", func(c *runtime.Client, key string) Locker { return c.FairLock(key, o) })
	// A reader is cut off; a writer waits for it.
	ks = append(ks, Kind{"read",
		func(c *runtime.Client, key string) Locker { return c.ReadWrite(key, o).Read() },
		func(c *runtime.Client, key string) Locker { return c.ReadWrite(key, o).Write() }})
	same("write", func(c *runtime.Client, key string) Locker { return c.ReadWrite(key, o).Write() })
	same("multi", func(c *runtime.Client, key string) Locker {
		return c.MultiLock(o, c.Mutex("{"+key+"}a", o), c.Mutex("{"+key+"}b", o))
	})
	same("red", func(c *runtime.Client, key string) Locker { return c.RedLock(key, o) })
	// A fenced lock's acquire script differs from a plain lock's (the
	// token INCR); its holds and deadlines must not.
	same("fenced", func(c *runtime.Client, key string) Locker { return c.FencedLock(key, o) })
	// A holder cut off from Redis must see its ctx done before a waiter
	// on a healthy link gets the permit back by reclaiming it.
	same("semaphore", func(c *runtime.Client, key string) Locker { return permitLocker{c, key} })
	return ks
}()

// permitLocker is a one-permit semaphore as the tests want a lock: the
// lease is the test's, per acquisition.
type permitLocker struct {
	c   *runtime.Client
	key string
}

func (p permitLocker) sem(lease time.Duration) *runtime.Semaphore {
	return p.c.Semaphore(p.key, runtime.SemaphoreOptions{Permits: 1, Lease: lease})
}

func (p permitLocker) TryLock(ctx context.Context, wait, lease time.Duration) (context.Context, error) {
	return p.sem(lease).TryAcquire(ctx, 1, wait)
}

func (p permitLocker) Unlock(ctx context.Context) error { return p.sem(0).Release(ctx) }
