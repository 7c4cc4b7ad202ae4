package runtime

import (
	"context"
	"fmt"
)

// Value runs fn while holding a lock and returns fn's value: do is the Do
// method of the lock's handle, which takes the lock, runs fn with the ctx
// of the hold and releases it. A generated With<Name> helper is that Do,
// so
//
//	n, err := runtime.Value(ctx, shop.OrderLock(orderID).Do, func(ctx context.Context) (int, error) {
//		return countItems(ctx, orderID)
//	})
//
// holds OrderLock exactly as shop.WithOrderLock(ctx, orderID, …) does,
// without a variable outside the closure to carry n. It works with every
// handle that has Do: a Mutex (reentrant and fair locks), either side of
// an RWLock (shop.Catalog(shopID).Read().Do), a FencedLock (fn reads the
// token with Fence(ctx)), a MultiLock, a RedLock and a Semaphore; and with
// any func of Do's shape, such as a closure around a With<Name> call.
//
// Value returns what fn returned and do's error: fn's error, joined with
// ErrLockLost or a failed release as Do joins them. Where fn ran, its
// value is returned even with an error (a value computed by a hold that
// was lost meanwhile is the caller's to judge); where fn did not run (the
// lock was not acquired), the value is T's zero value. A panic in fn
// propagates after do has released the lock.
//
// Value costs what a variable captured by a closure costs: one closure
// and the value, on the heap.
func Value[T any](ctx context.Context, do func(ctx context.Context, fn func(ctx context.Context) error) error, fn func(ctx context.Context) (T, error)) (T, error) {
	var v T
	if do == nil || fn == nil {
		return v, fmt.Errorf("lockgen: Value: %w: nil do or fn", ErrInvalidArgument)
	}
	err := do(ctx, func(ctx context.Context) error {
		var err error
		v, err = fn(ctx)
		return err
	})
	return v, err
}
