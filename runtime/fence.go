package runtime

import (
	"context"
	"fmt"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/holds"
)

// FencedLock is a reentrant lock whose every acquisition (re-entries
// included) comes with a fencing token: a number that grows with every
// acquisition of the lock by anyone. It plays the part of Redisson's
// RFencedLock, with its layout: RLock's hash at Key, and the token counter
// at redisson_lock_token:{Key}, a decimal integer with no TTL that is never
// reset. The token is incremented by the acquire script itself, so an
// uncontended acquire and release are still two commands.
//
// A lock cannot stop a holder that was paused (a GC pause, a stopped VM)
// past its lease: by the time it resumes, another owner may hold the lock.
// The token is what lets the resource it protects tell them apart: send it
// with every write, and have the resource refuse a write whose token is
// lower than the highest it has seen. See the package doc.
//
// The embedded Mutex's Lock, TryLock and Do are fenced too: Fence reads the
// token from the ctx they return.
type FencedLock struct {
	*Mutex
}

// made reports whether a Client made f (see errNotMade). The Mutex
// methods f promotes check their own receiver, f.Mutex; called through a
// nil *FencedLock they panic, as Go reaches f.Mutex through f.
func (f *FencedLock) made() bool { return f != nil && f.Mutex.made() }

// LockFenced waits until it holds the lock or ctx is done, with the lease
// of the lock's options, and returns the ctx of the hold and its token.
func (f *FencedLock) LockFenced(ctx context.Context) (context.Context, int64, error) {
	if !f.made() {
		return nil, 0, notMade("acquire")
	}
	return f.TryLockFenced(ctx, Forever, f.opts.Lease)
}

// TryLockFenced is TryLock that also returns the acquisition's token.
func (f *FencedLock) TryLockFenced(ctx context.Context, wait, lease time.Duration) (context.Context, int64, error) {
	if !f.made() {
		return nil, 0, notMade("acquire")
	}
	hctx, err := f.Mutex.TryLock(ctx, wait, lease)
	if err != nil {
		return nil, 0, err
	}
	fence, _ := Fence(hctx)
	return hctx, fence, nil
}

// DoFenced is Do with the acquisition's token passed to fn.
func (f *FencedLock) DoFenced(ctx context.Context, fn func(ctx context.Context, fence int64) error) error {
	if !f.made() {
		return notMade("acquire")
	}
	if fn == nil {
		return f.fail("acquire", fmt.Errorf("%w: nil fn", ErrInvalidArgument))
	}
	return f.Do(ctx, func(ctx context.Context) error {
		fence, _ := Fence(ctx)
		return fn(ctx, fence)
	})
}

// Token is the lock's token counter as it stands: the token of the latest
// acquisition by anyone (0 before the first).
func (f *FencedLock) Token(ctx context.Context) (int64, error) {
	if err := guard(f, ctx, "inspect"); err != nil {
		return 0, err
	}
	return f.e.Token(ctx)
}

// Fence returns the fencing token of the innermost fenced acquisition whose
// hold ctx is, or is an ancestor of, ctx; false when there is none.
func Fence(ctx context.Context) (int64, bool) {
	if ctx == nil {
		return 0, false
	}
	n, ok := ctx.Value(holds.FenceKey{}).(int64)
	return n, ok
}
