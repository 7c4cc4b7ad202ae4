// Package unlockfn releases a Lock's hold through a closure or a helper of
// its own package before it takes another instance: not nested; unless
// the closure or helper Unlocks only on some ways through it, or another
// handle, or the hold of its own Lock.
package unlockfn

import (
	"context"

	"example.com/vettest/locks"
	"github.com/lockgen/lockgen/runtime"
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

// Sometimes calls a closure that Unlocks only in a branch, which it does
// not take: a is still held.
func Sometimes(ctx context.Context, l *locks.Locks, a, b int64) error { // want Sometimes:`^acquires locks\.OrderLock$`
	hctx, err := l.OrderLock(a).Lock(ctx)
	if err != nil {
		return err
	}
	release := func(done bool) {
		if done {
			_ = l.OrderLock(a).Unlock(hctx)
		}
	}
	release(false)
	return l.WithOrderLock(hctx, b, work) // want `^nested instances of one lock: locks.OrderLock\(b\) is taken while locks.OrderLock\(a\) is held`
}

func (s *S) maybeRelease(id int64, hctx context.Context, done bool) {
	if done {
		_ = s.l.OrderLock(id).Unlock(hctx)
	}
}

// MaybeHelper's helper Unlocks only in a branch.
func (s *S) MaybeHelper(ctx context.Context, a, b int64) error { // want MaybeHelper:`^acquires locks\.OrderLock$`
	hctx, err := s.l.OrderLock(a).Lock(ctx)
	if err != nil {
		return err
	}
	s.maybeRelease(a, hctx, false)
	return s.l.WithOrderLock(hctx, b, work) // want `^nested instances of one lock: locks.OrderLock\(b\) is taken while locks.OrderLock\(a\) is held`
}

func (s *S) releasePayment(hctx context.Context) { _ = s.l.PaymentLock("p").Unlock(hctx) }

// OtherHandle's helper Unlocks another lock's handle with the hold it is
// given: a stays held.
func (s *S) OtherHandle(ctx context.Context, a, b int64) error { // want OtherHandle:`^acquires locks\.OrderLock$`
	hctx, err := s.l.OrderLock(a).Lock(ctx)
	if err != nil {
		return err
	}
	s.releasePayment(hctx)
	return s.l.WithOrderLock(hctx, b, work) // want `^nested instances of one lock: locks.OrderLock\(b\) is taken while locks.OrderLock\(a\) is held`
}

// OwnLock calls a closure that Unlocks the hold of its own Lock: a stays
// held.
func OwnLock(ctx context.Context, c *runtime.Client, l *locks.Locks, a, b int64, k string) error { // want OwnLock:`^acquires locks\.OrderLock$`
	hctx, err := l.OrderLock(a).Lock(ctx)
	if err != nil {
		return err
	}
	probe := func() {
		m := c.Mutex(k, runtime.LockOptions{})
		h, _ := m.Lock(hctx)
		_ = m.Unlock(h)
	}
	probe()
	return l.WithOrderLock(hctx, b, work) // want `^nested instances of one lock: locks.OrderLock\(b\) is taken while locks.OrderLock\(a\) is held`
}

func (s *S) releaseUnless(id int64, hctx context.Context, keep bool) {
	if keep {
		return
	}
	_ = s.l.OrderLock(id).Unlock(hctx)
}

// EarlyOut's helper may return before its Unlock.
func (s *S) EarlyOut(ctx context.Context, a, b int64) error { // want EarlyOut:`^acquires locks\.OrderLock$`
	hctx, err := s.l.OrderLock(a).Lock(ctx)
	if err != nil {
		return err
	}
	s.releaseUnless(a, hctx, true)
	return s.l.WithOrderLock(hctx, b, work) // want `^nested instances of one lock: locks.OrderLock\(b\) is taken while locks.OrderLock\(a\) is held`
}

// Recovered releases a in a func literal called on the spot that
// recovers from a panic: its Unlock is on every way through it.
func (s *S) Recovered(ctx context.Context, a, b int64) error { // want Recovered:`^acquires locks\.OrderLock$`
	hctx, err := s.l.OrderLock(a).Lock(ctx)
	if err != nil {
		return err
	}
	func() {
		defer func() { _ = recover() }()
		_ = s.l.OrderLock(a).Unlock(hctx)
	}()
	return s.l.WithOrderLock(ctx, b, work)
}

// RecoveredLate's func literal may panic before its Unlock; it recovers
// and returns holding a.
func (s *S) RecoveredLate(ctx context.Context, a, b int64) error { // want RecoveredLate:`^acquires locks\.OrderLock$`
	hctx, err := s.l.OrderLock(a).Lock(ctx)
	if err != nil {
		return err
	}
	func() {
		defer func() { _ = recover() }()
		if a == b {
			panic("same")
		}
		_ = s.l.OrderLock(a).Unlock(hctx)
	}()
	return s.l.WithOrderLock(ctx, b, work) // want `^nested instances of one lock: locks.OrderLock\(b\) is taken while locks.OrderLock\(a\) is held`
}

func work(context.Context) error { return nil }
