package runtime_test

import (
	"context"
	"time"

	"github.com/lockgen/lockgen/runtime"
)

// A held permit joins the fault matrix of the deadline invariant
// (overlap_test.go): a holder cut off from Redis must see its ctx done
// before a waiter on a healthy link gets the permit back by reclaiming it.
func init() {
	p := func(c *runtime.Client, key string) overlapLocker { return permitLocker{c, key} }
	overlapKinds = append(overlapKinds, overlapKind{"semaphore", p, p})
}

// permitLocker is a one-permit semaphore as the matrix wants a lock: the
// lease is the matrix's, per acquisition.
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
