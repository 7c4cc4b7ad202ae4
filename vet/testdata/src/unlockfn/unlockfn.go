// Package unlockfn releases a Lock's hold through a closure or a helper of
// its own package before it takes another instance: not nested.
package unlockfn

import (
	"context"

	"example.com/vettest/locks"
)

func Closure(ctx context.Context, l *locks.Locks, a, b int64) error { // want Closure:`^acquires locks\.OrderLock$`
	hctx, err := l.OrderLock(a).Lock(ctx)
	if err != nil {
		return err
	}
	unlock := func() { _ = l.OrderLock(a).Unlock(hctx) }
	_ = work(hctx)
	unlock()
	return l.WithOrderLock(ctx, b, work)
}

type S struct{ l *locks.Locks }

func (s *S) release(id int64, hctx context.Context) { _ = s.l.OrderLock(id).Unlock(hctx) }

func (s *S) Helper(ctx context.Context, a, b int64) error { // want Helper:`^acquires locks\.OrderLock$`
	hctx, err := s.l.OrderLock(a).Lock(ctx)
	if err != nil {
		return err
	}
	_ = work(hctx)
	s.release(a, hctx)
	return s.l.WithOrderLock(ctx, b, work)
}

// Deferred releases through the closure only when it returns: b is taken
// while a is held.
func Deferred(ctx context.Context, l *locks.Locks, a, b int64) error { // want Deferred:`^acquires locks\.OrderLock$`
	hctx, err := l.OrderLock(a).Lock(ctx)
	if err != nil {
		return err
	}
	unlock := func() { _ = l.OrderLock(a).Unlock(hctx) }
	defer unlock()
	return l.WithOrderLock(hctx, b, work) // want `^nested instances of one lock: locks.OrderLock\(b\) is taken while locks.OrderLock\(a\) is held`
}

func work(context.Context) error { return nil }
