// Package branches takes instances of OrderLock in branches that exclude
// each other: the nested check follows a Lock to its Unlock along each
// branch, and a branch that returns holds nothing after it.
package branches

import (
	"context"
	"errors"

	"example.com/vettest/locks"
)

// Refund takes one instance in each case of a switch: never two at once.
func Refund(ctx context.Context, l *locks.Locks, kind int, a, b int64) error { // want Refund:`^acquires locks\.OrderLock$`
	switch kind {
	case 1:
		hctx, err := l.OrderLock(a).Lock(ctx)
		if err != nil {
			return err
		}
		defer l.OrderLock(a).Unlock(hctx)
		return work(hctx)
	default:
		hctx, err := l.OrderLock(b).Lock(ctx)
		if err != nil {
			return err
		}
		defer l.OrderLock(b).Unlock(hctx)
		return work(hctx)
	}
}

// IfElse does the same with an if and its else.
func IfElse(ctx context.Context, l *locks.Locks, first bool, a, b int64) error { // want IfElse:`^acquires locks\.OrderLock$`
	var hctx context.Context
	var err error
	if first {
		hctx, err = l.OrderLock(a).Lock(ctx)
	} else {
		hctx, err = l.OrderLock(b).Lock(ctx)
	}
	if err != nil {
		return err
	}
	return work(hctx)
}

// Early returns from the branch that holds a.
func Early(ctx context.Context, l *locks.Locks, fast bool, a, b int64) error { // want Early:`^acquires locks\.OrderLock$`
	if fast {
		hctx, err := l.OrderLock(a).Lock(ctx)
		if err != nil {
			return err
		}
		defer l.OrderLock(a).Unlock(hctx)
		return work(hctx)
	}
	return l.WithOrderLock(ctx, b, work)
}

// Fallback works on the fallback order when the primary's lock is busy:
// the primary is not held then.
func Fallback(ctx context.Context, l *locks.Locks, primary, fallback int64) error { // want Fallback:`^acquires locks\.OrderLock$`
	hctx, err := l.OrderLock(primary).TryLock(ctx, 0, 0)
	if err != nil {
		return l.WithOrderLock(ctx, fallback, work)
	}
	defer l.OrderLock(primary).Unlock(hctx)
	return work(hctx)
}

// Maybe holds a after the branch that took it, which falls through.
func Maybe(ctx context.Context, l *locks.Locks, cond bool, a, b int64) error { // want Maybe:`^acquires locks\.OrderLock$`
	if cond {
		hctx, err := l.OrderLock(a).Lock(ctx)
		if err != nil {
			return err
		}
		defer l.OrderLock(a).Unlock(hctx)
	}
	return l.WithOrderLock(ctx, b, work) // want `^nested instances of one lock: locks.OrderLock\(b\) is taken while locks.OrderLock\(a\) is held`
}

// Fallthrough unlocks a in the clause that case 1 falls through into: a
// is not held after the switch.
func Fallthrough(ctx context.Context, l *locks.Locks, k int, a, b int64) error { // want Fallthrough:`^acquires locks\.OrderLock$`
	hctx, err := l.OrderLock(a).Lock(ctx)
	if err != nil {
		return err
	}
	switch k {
	case 1:
		_ = work(hctx)
		fallthrough
	default:
		_ = l.OrderLock(a).Unlock(hctx)
	}
	return l.WithOrderLock(ctx, b, work)
}

// Flag unlocks a early on one path, else at the end: every way out of the
// two ifs releases it (a hold taken before a branch stays held after it
// only when every way out of the branch holds it).
func Flag(ctx context.Context, l *locks.Locks, fast bool, a, b int64) error { // want Flag:`^acquires locks\.OrderLock$`
	hctx, err := l.OrderLock(a).Lock(ctx)
	if err != nil {
		return err
	}
	locked := true
	if fast {
		_ = l.OrderLock(a).Unlock(hctx)
		locked = false
	}
	if locked {
		_ = l.OrderLock(a).Unlock(hctx)
	}
	return l.WithOrderLock(ctx, b, work)
}

type mode int

const (
	modeA mode = iota
	modeB
)

// EveryCase unlocks a in every case of a switch over an enum, which has
// no default.
func EveryCase(ctx context.Context, l *locks.Locks, m mode, a, b int64) error { // want EveryCase:`^acquires locks\.OrderLock$`
	hctx, err := l.OrderLock(a).Lock(ctx)
	if err != nil {
		return err
	}
	switch m {
	case modeA:
		_ = work(hctx)
		_ = l.OrderLock(a).Unlock(hctx)
	case modeB:
		_ = l.OrderLock(a).Unlock(hctx)
	}
	return l.WithOrderLock(ctx, b, work)
}

// ElseIf unlocks a under complementary conditions.
func ElseIf(ctx context.Context, l *locks.Locks, x bool, a, b int64) error { // want ElseIf:`^acquires locks\.OrderLock$`
	hctx, err := l.OrderLock(a).Lock(ctx)
	if err != nil {
		return err
	}
	if x {
		_ = l.OrderLock(a).Unlock(hctx)
	} else if !x {
		_ = l.OrderLock(a).Unlock(hctx)
	}
	return l.WithOrderLock(ctx, b, work)
}

// Logged goes on when its Lock fails: where it succeeded, a is held.
func Logged(ctx context.Context, l *locks.Locks, a, b int64) error { // want Logged:`^acquires locks\.OrderLock$`
	hctx, err := l.OrderLock(a).Lock(ctx)
	if err != nil {
		_ = work(ctx)
	}
	defer l.OrderLock(a).Unlock(hctx)
	return l.WithOrderLock(ctx, b, work) // want `^nested instances of one lock: locks.OrderLock\(b\) is taken while locks.OrderLock\(a\) is held`
}

// Busy falls back when the primary's lock is busy, told by errors.Is:
// true only for an error, so the primary is not held there.
func Busy(ctx context.Context, l *locks.Locks, primary, fallback int64) error { // want Busy:`^acquires locks\.OrderLock$`
	hctx, err := l.OrderLock(primary).TryLock(ctx, 0, 0)
	if errors.Is(err, errBusy) {
		return l.WithOrderLock(ctx, fallback, work)
	}
	if err != nil {
		return err
	}
	defer l.OrderLock(primary).Unlock(hctx)
	return work(hctx)
}

// BusyAnd tells the failure with err != nil && ...: true only when the
// Lock failed.
func BusyAnd(ctx context.Context, l *locks.Locks, primary, fallback int64) error { // want BusyAnd:`^acquires locks\.OrderLock$`
	hctx, err := l.OrderLock(primary).TryLock(ctx, 0, 0)
	if nil != err && !errors.Is(err, context.Canceled) {
		return l.WithOrderLock(ctx, fallback, work)
	}
	if err != nil {
		return err
	}
	defer l.OrderLock(primary).Unlock(hctx)
	return work(hctx)
}

// OkOr goes on where err == nil || ... is false: the Lock failed there.
func OkOr(ctx context.Context, l *locks.Locks, urgent bool, primary, fallback int64) error { // want OkOr:`^acquires locks\.OrderLock$`
	hctx, err := l.OrderLock(primary).TryLock(ctx, 0, 0)
	if !(err == nil || urgent) || errBusy == err {
		return l.WithOrderLock(ctx, fallback, work)
	}
	if err != nil {
		return err
	}
	defer l.OrderLock(primary).Unlock(hctx)
	return work(hctx)
}

// SwitchOnErr tells the outcome in a switch without a tag.
func SwitchOnErr(ctx context.Context, l *locks.Locks, primary, fallback int64) error { // want SwitchOnErr:`^acquires locks\.OrderLock$`
	hctx, err := l.OrderLock(primary).TryLock(ctx, 0, 0)
	switch {
	case errors.Is(err, errBusy):
		return l.WithOrderLock(ctx, fallback, work)
	case err != nil:
		return err
	}
	defer l.OrderLock(primary).Unlock(hctx)
	return work(hctx)
}

// SwitchOkFirst handles success first: the default clause is reached only
// when the Lock failed.
func SwitchOkFirst(ctx context.Context, l *locks.Locks, primary, fallback int64) error { // want SwitchOkFirst:`^acquires locks\.OrderLock$`
	hctx, err := l.OrderLock(primary).TryLock(ctx, 0, 0)
	switch {
	case err == nil:
		defer l.OrderLock(primary).Unlock(hctx)
		return work(hctx)
	default:
		return l.WithOrderLock(ctx, fallback, work)
	}
}

// SwitchTag switches on the error itself.
func SwitchTag(ctx context.Context, l *locks.Locks, primary, fallback int64) error { // want SwitchTag:`^acquires locks\.OrderLock$`
	hctx, err := l.OrderLock(primary).TryLock(ctx, 0, 0)
	switch err {
	case nil:
		defer l.OrderLock(primary).Unlock(hctx)
		return work(hctx)
	case errBusy:
		return l.WithOrderLock(ctx, fallback, work)
	default:
		return err
	}
}

// SwitchMaybe still holds the primary in a clause its outcome does not
// decide.
func SwitchMaybe(ctx context.Context, l *locks.Locks, urgent bool, primary, fallback int64) error { // want SwitchMaybe:`^acquires locks\.OrderLock$`
	hctx, err := l.OrderLock(primary).TryLock(ctx, 0, 0)
	switch {
	case urgent, err != nil:
		return l.WithOrderLock(ctx, fallback, work) // want `^nested instances of one lock: locks.OrderLock\(fallback\) is taken while locks.OrderLock\(primary\) is held`
	}
	defer l.OrderLock(primary).Unlock(hctx)
	return work(hctx)
}

// OrMaybe still holds the primary where err != nil || ... is true.
func OrMaybe(ctx context.Context, l *locks.Locks, urgent bool, primary, fallback int64) error { // want OrMaybe:`^acquires locks\.OrderLock$`
	hctx, err := l.OrderLock(primary).TryLock(ctx, 0, 0)
	if err != nil || urgent {
		return l.WithOrderLock(ctx, fallback, work) // want `^nested instances of one lock: locks.OrderLock\(fallback\) is taken while locks.OrderLock\(primary\) is held`
	}
	defer l.OrderLock(primary).Unlock(hctx)
	return work(hctx)
}

// AndMaybe still holds the primary where err == nil && urgent is false.
func AndMaybe(ctx context.Context, l *locks.Locks, urgent bool, primary, fallback int64) error { // want AndMaybe:`^acquires locks\.OrderLock$`
	hctx, err := l.OrderLock(primary).TryLock(ctx, 0, 0)
	if err == nil && urgent {
		defer l.OrderLock(primary).Unlock(hctx)
		return work(hctx)
	}
	return l.WithOrderLock(ctx, fallback, work) // want `^nested instances of one lock: locks.OrderLock\(fallback\) is taken while locks.OrderLock\(primary\) is held`
}

var errBusy = errors.New("busy")

func work(context.Context) error { return nil }
