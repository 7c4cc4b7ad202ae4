// Package lockfail: the nested check where a Lock may have failed, in
// switch clauses and comparisons, and Unlocks in func literals (a
// review's cases: each want states the correct report).
package lockfail

import (
	"context"
	"errors"

	"example.com/vettest/locks"
)

// DeferredLit releases a in a deferred func literal: it runs when the
// function returns, so b is taken while a is held.
func DeferredLit(ctx context.Context, l *locks.Locks, a, b int64) error { // want DeferredLit:`^acquires locks\.OrderLock$`
	hctx, err := l.OrderLock(a).Lock(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = l.OrderLock(a).Unlock(hctx) }()
	return l.WithOrderLock(hctx, b, work) // want `^nested instances of one lock: locks.OrderLock\(b\) is taken while locks.OrderLock\(a\) is held`
}

// DeferredLitArg passes the hold to a deferred func literal.
func DeferredLitArg(ctx context.Context, l *locks.Locks, a, b int64) error { // want DeferredLitArg:`^acquires locks\.OrderLock$`
	hctx, err := l.OrderLock(a).Lock(ctx)
	if err != nil {
		return err
	}
	defer func(h context.Context) { _ = l.OrderLock(a).Unlock(h) }(hctx)
	return l.WithOrderLock(hctx, b, work) // want `^nested instances of one lock: locks.OrderLock\(b\) is taken while locks.OrderLock\(a\) is held`
}

// LitDefersUnlock releases a in a defer of a func literal called on the
// spot: released when the literal returns; not nested.
func LitDefersUnlock(ctx context.Context, l *locks.Locks, a, b int64) error { // want LitDefersUnlock:`^acquires locks\.OrderLock$`
	hctx, err := l.OrderLock(a).Lock(ctx)
	if err != nil {
		return err
	}
	func() {
		defer func() { _ = l.OrderLock(a).Unlock(hctx) }()
		_ = work(hctx)
	}()
	return l.WithOrderLock(ctx, b, work)
}

// LitReturnsFirst returns before its Unlock on one way: a still held.
func LitReturnsFirst(ctx context.Context, l *locks.Locks, a, b int64) error { // want LitReturnsFirst:`^acquires locks\.OrderLock$`
	hctx, err := l.OrderLock(a).Lock(ctx)
	if err != nil {
		return err
	}
	func() {
		if a > b {
			return
		}
		_ = l.OrderLock(a).Unlock(hctx)
	}()
	return l.WithOrderLock(ctx, b, work) // want `^nested instances of one lock: locks.OrderLock\(b\) is taken while locks.OrderLock\(a\) is held`
}

// LitGoto jumps past its Unlock.
func LitGoto(ctx context.Context, l *locks.Locks, a, b int64) error { // want LitGoto:`^acquires locks\.OrderLock$`
	hctx, err := l.OrderLock(a).Lock(ctx)
	if err != nil {
		return err
	}
	func() {
		if a > b {
			goto out
		}
		_ = l.OrderLock(a).Unlock(hctx)
	out:
	}()
	return l.WithOrderLock(ctx, b, work) // want `^nested instances of one lock: locks.OrderLock\(b\) is taken while locks.OrderLock\(a\) is held`
}

func swallow() { _ = recover() }

// LitRecoverHelper recovers through a named deferred function (recover
// works there too): the panic returns before the Unlock, a still held.
func LitRecoverHelper(ctx context.Context, l *locks.Locks, a, b int64) error { // want LitRecoverHelper:`^acquires locks\.OrderLock$`
	hctx, err := l.OrderLock(a).Lock(ctx)
	if err != nil {
		return err
	}
	func() {
		defer swallow()
		if a == b {
			panic("same")
		}
		_ = l.OrderLock(a).Unlock(hctx)
	}()
	return l.WithOrderLock(ctx, b, work) // want `^nested instances of one lock: locks.OrderLock\(b\) is taken while locks.OrderLock\(a\) is held`
}

func mustWork(ctx context.Context) {
	if err := work(ctx); err != nil {
		panic(err)
	}
}

// LitRecoverCallee: a call before the Unlock panics and the literal
// recovers, returning with a held.
func LitRecoverCallee(ctx context.Context, l *locks.Locks, a, b int64) error { // want LitRecoverCallee:`^acquires locks\.OrderLock$`
	hctx, err := l.OrderLock(a).Lock(ctx)
	if err != nil {
		return err
	}
	func() {
		defer func() { _ = recover() }()
		mustWork(hctx)
		_ = l.OrderLock(a).Unlock(hctx)
	}()
	return l.WithOrderLock(ctx, b, work) // want `^nested instances of one lock: locks.OrderLock\(b\) is taken while locks.OrderLock\(a\) is held`
}

// GoLit unlocks in a goroutine: not yet released.
func GoLit(ctx context.Context, l *locks.Locks, a, b int64) error { // want GoLit:`^acquires locks\.OrderLock$`
	hctx, err := l.OrderLock(a).Lock(ctx)
	if err != nil {
		return err
	}
	go func() { _ = l.OrderLock(a).Unlock(hctx) }()
	return l.WithOrderLock(ctx, b, work) // want `^nested instances of one lock: locks.OrderLock\(b\) is taken while locks.OrderLock\(a\) is held`
}

// FallIntoDefault: default is entered directly where err == nil (a
// held) or by fallthrough where it failed; a is held after the switch.
func FallIntoDefault(ctx context.Context, l *locks.Locks, a, b int64) error { // want FallIntoDefault:`^acquires locks\.OrderLock$`
	hctx, err := l.OrderLock(a).TryLock(ctx, 0, 0)
	switch {
	case err != nil:
		_ = work(ctx)
		fallthrough
	default:
		_ = work(hctx)
	}
	return l.WithOrderLock(ctx, b, work) // want `^nested instances of one lock: locks.OrderLock\(b\) is taken while locks.OrderLock\(a\) is held`
}

// FallIntoCase: case urgent is entered directly with a held (err == nil)
// too.
func FallIntoCase(ctx context.Context, l *locks.Locks, urgent bool, a, b int64) error { // want FallIntoCase:`^acquires locks\.OrderLock$`
	hctx, err := l.OrderLock(a).TryLock(ctx, 0, 0)
	switch {
	case err != nil:
		_ = work(ctx)
		fallthrough
	case urgent:
		return l.WithOrderLock(ctx, b, work) // want `^nested instances of one lock: locks.OrderLock\(b\) is taken while locks.OrderLock\(a\) is held`
	}
	defer l.OrderLock(a).Unlock(hctx)
	return work(hctx)
}

// MiddleDefault: a default in the middle is entered only when every case
// is false, err == nil among them: not nested.
func MiddleDefault(ctx context.Context, l *locks.Locks, urgent bool, a, b int64) error { // want MiddleDefault:`^acquires locks\.OrderLock$`
	hctx, err := l.OrderLock(a).TryLock(ctx, 0, 0)
	switch {
	case urgent:
		return err
	default:
		return l.WithOrderLock(ctx, b, work)
	case err == nil:
	}
	defer l.OrderLock(a).Unlock(hctx)
	return work(hctx)
}

// AfterMiddleDefault: a case after a default is entered with a held.
func AfterMiddleDefault(ctx context.Context, l *locks.Locks, urgent bool, a, b int64) error { // want AfterMiddleDefault:`^acquires locks\.OrderLock$`
	hctx, err := l.OrderLock(a).TryLock(ctx, 0, 0)
	switch {
	case err != nil:
		return err
	default:
		defer l.OrderLock(a).Unlock(hctx)
		return work(hctx)
	case urgent:
		return l.WithOrderLock(ctx, b, work) // want `^nested instances of one lock: locks.OrderLock\(b\) is taken while locks.OrderLock\(a\) is held`
	}
}

// MixedList: a case mixing err == nil and errors.Is is entered held.
func MixedList(ctx context.Context, l *locks.Locks, a, b int64) error { // want MixedList:`^acquires locks\.OrderLock$`
	hctx, err := l.OrderLock(a).TryLock(ctx, 0, 0)
	switch {
	case errors.Is(err, errBusy), err == nil:
		return l.WithOrderLock(ctx, b, work) // want `^nested instances of one lock: locks.OrderLock\(b\) is taken while locks.OrderLock\(a\) is held`
	}
	_ = hctx
	return err
}

// IsNil: errors.Is(err, nil) is true where the Lock succeeded.
func IsNil(ctx context.Context, l *locks.Locks, a, b int64) error { // want IsNil:`^acquires locks\.OrderLock$`
	hctx, err := l.OrderLock(a).TryLock(ctx, 0, 0)
	if errors.Is(err, nil) {
		defer l.OrderLock(a).Unlock(hctx)
		return l.WithOrderLock(ctx, b, work) // want `^nested instances of one lock: locks.OrderLock\(b\) is taken while locks.OrderLock\(a\) is held`
	}
	return err
}

// IsCtxErr: errors.Is(err, ctx.Err()) is true where the Lock succeeded
// (ctx.Err() is nil while ctx runs).
func IsCtxErr(ctx context.Context, l *locks.Locks, a, b int64) error { // want IsCtxErr:`^acquires locks\.OrderLock$`
	hctx, err := l.OrderLock(a).TryLock(ctx, 0, 0)
	if errors.Is(err, ctx.Err()) {
		defer l.OrderLock(a).Unlock(hctx)
		return l.WithOrderLock(ctx, b, work) // want `^nested instances of one lock: locks.OrderLock\(b\) is taken while locks.OrderLock\(a\) is held`
	}
	return err
}

// TwoErrs: err == werr is true where the Lock and work both succeeded.
func TwoErrs(ctx context.Context, l *locks.Locks, a, b int64) error { // want TwoErrs:`^acquires locks\.OrderLock$`
	hctx, err := l.OrderLock(a).TryLock(ctx, 0, 0)
	werr := work(ctx)
	if err == werr {
		defer l.OrderLock(a).Unlock(hctx)
		return l.WithOrderLock(ctx, b, work) // want `^nested instances of one lock: locks.OrderLock\(b\) is taken while locks.OrderLock\(a\) is held`
	}
	return err
}

// Reassigned: err is work's when it is checked; a may be held.
func Reassigned(ctx context.Context, l *locks.Locks, a, b int64) error { // want Reassigned:`^acquires locks\.OrderLock$`
	hctx, err := l.OrderLock(a).TryLock(ctx, 0, 0)
	if err == nil {
		err = work(hctx)
	}
	if err != nil {
		return l.WithOrderLock(ctx, b, work) // want `^nested instances of one lock: locks.OrderLock\(b\) is taken while locks.OrderLock\(a\) is held`
	}
	return l.OrderLock(a).Unlock(hctx)
}

// Shadowed: the inner err is another Lock's; a is held in its branch.
func Shadowed(ctx context.Context, l *locks.Locks, a, b, c int64) error { // want Shadowed:`^acquires locks\.OrderLock, locks\.PaymentLock$`
	hctx, err := l.OrderLock(a).Lock(ctx)
	if err != nil {
		return err
	}
	defer l.OrderLock(a).Unlock(hctx)
	if _, err := l.PaymentLock("p").TryLock(ctx, 0, 0); err != nil {
		return l.WithOrderLock(ctx, b, work) // want `^nested instances of one lock: locks.OrderLock\(b\) is taken while locks.OrderLock\(a\) is held`
	}
	return nil
}

// SwitchErrNotNil: the cases of switch err that are sentinels are
// failures. Not nested.
func SwitchErrNotNil(ctx context.Context, l *locks.Locks, a, b int64) error { // want SwitchErrNotNil:`^acquires locks\.OrderLock$`
	hctx, err := l.OrderLock(a).TryLock(ctx, 0, 0)
	switch err {
	case errBusy, context.DeadlineExceeded:
		return l.WithOrderLock(ctx, b, work)
	case nil:
	default:
		return err
	}
	defer l.OrderLock(a).Unlock(hctx)
	return work(hctx)
}

// Common idioms that must stay quiet.

// AsTarget: errors.As into a target.
func AsTarget(ctx context.Context, l *locks.Locks, a, b int64) error { // want AsTarget:`^acquires locks\.OrderLock$`
	hctx, err := l.OrderLock(a).TryLock(ctx, 0, 0)
	var te interface{ Timeout() bool }
	if errors.As(err, &te) && te.Timeout() {
		return l.WithOrderLock(ctx, b, work)
	}
	if err != nil {
		return err
	}
	defer l.OrderLock(a).Unlock(hctx)
	return work(hctx)
}

// InitIf: the Lock in the if's init, fallback in its body.
func InitIf(ctx context.Context, l *locks.Locks, a, b int64) error { // want InitIf:`^acquires locks\.OrderLock$`
	if hctx, err := l.OrderLock(a).TryLock(ctx, 0, 0); err != nil {
		return l.WithOrderLock(ctx, b, work)
	} else {
		defer l.OrderLock(a).Unlock(hctx)
		return work(hctx)
	}
}

// InitSwitch: the Lock in a switch's init.
func InitSwitch(ctx context.Context, l *locks.Locks, a, b int64) error { // want InitSwitch:`^acquires locks\.OrderLock$`
	switch hctx, err := l.OrderLock(a).TryLock(ctx, 0, 0); {
	case err == nil:
		defer l.OrderLock(a).Unlock(hctx)
		return work(hctx)
	case errors.Is(err, errBusy):
		return l.WithOrderLock(ctx, b, work)
	default:
		return err
	}
}

var errBusy = errors.New("busy")

func work(context.Context) error { return nil }
