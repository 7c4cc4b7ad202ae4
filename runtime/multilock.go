package runtime

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/holds"
	"github.com/lockgen/lockgen/runtime/internal/mutex"
)

// MultiLock holds several locks all-or-nothing (Redisson's RedissonMultiLock).
//
// When every member is a reentrant lock (not fenced: a fenced member is
// taken on its own, with its token) and all their keys live in one
// cluster slot (always, on a single server), the members are taken and
// released by one script call each: one round trip, atomic. Otherwise they
// are taken one by one in a canonical order (sorted by key), each with its
// own semantics (a fair member queues), and what was taken is released
// again if a later member cannot be had within the wait time; since every
// multi-lock takes shared members in the same order, two multi-locks over
// the same members cannot deadlock.
//
// One wait time covers the whole acquisition. Every member is renewed by
// the watchdog (or has the fixed lease), and the ctx of the hold is
// cancelled when any member is lost.
//
// Members are locks of the multi-lock's Client, one per key: two handles
// of one lock count once, and two different locks on one key (the read
// and write sides of a read-write lock, a fenced and a plain lock) are
// refused (ErrInvalidArgument), as are members of another Client.
//
// The multi-lock's options give the name, the lease and the wait time; a
// member's own options give its kind's settings (QueueTimeout,
// WritersFirst) and SyncReplicas. Members with SyncReplicas are taken one
// by one, so that each acquisition is confirmed by its replicas.
type MultiLock struct {
	c       *Client
	opts    LockOptions
	members []*Mutex // sorted by key, no duplicates
	atomic  bool
	multi   *mutex.Multi // the engine of an atomic multi-lock (package mutex)
	invalid error        // why its members cannot be held together (membersOf)
}

// made reports whether a Client made l (see errNotMade).
func (l *MultiLock) made() bool { return l != nil && l.c != nil }

// Keys are the members' keys in acquisition order.
func (l *MultiLock) Keys() []string {
	if !l.made() {
		return nil
	}
	keys := make([]string, len(l.members))
	for i, m := range l.members {
		keys[i] = m.Key()
	}
	return keys
}

// Atomic reports whether the members are taken by one script call.
func (l *MultiLock) Atomic() bool { return l.made() && l.atomic }

func (l *MultiLock) fail(op string, err error) error {
	return &LockError{Op: op, Name: l.opts.Name, Key: strings.Join(l.Keys(), ","), Err: err}
}

// Lock waits until it holds every member or ctx is done.
func (l *MultiLock) Lock(ctx context.Context) (context.Context, error) {
	if !l.made() {
		return nil, notMade("acquire")
	}
	return l.TryLock(ctx, Forever, l.opts.Lease)
}

// TryLock waits up to wait for all members and holds them with lease.
func (l *MultiLock) TryLock(ctx context.Context, wait, lease time.Duration) (hctx context.Context, err error) {
	if !l.made() {
		return nil, notMade("acquire")
	}
	if err := l.usable(ctx); err != nil {
		return nil, l.fail("acquire", err)
	}
	owner, start := "", time.Now()
	defer func() {
		keys := strings.Join(l.Keys(), ",")
		observeTry(l.c.opts.Observer, ctx, l.opts.Name, keys, "multi", owner, start, err)
		switch {
		case err != nil:
		case l.atomic: // its members report its loss (holds.Group), from now on
			if g := l.c.env.Reg.Of(hctx).Acquisition().Hold().Group; g != nil {
				if e, ok := g.Announced(); ok {
					l.c.observeGroupLoss(g, e)
				}
			}
		default:
			observeLoss(l.c.opts.Observer, hctx, l.opts.Name, keys, "multi", owner)
		}
	}()
	if len(l.members) == 0 {
		return nil, l.fail("acquire", fmt.Errorf("%w: a multi-lock needs members", ErrInvalidArgument))
	}
	for _, m := range l.members {
		if err := m.check(lease); err != nil {
			return nil, l.fail("acquire", err)
		}
	}
	c := l.c
	if c.env.Reg.Of(ctx) == nil {
		owner = c.env.NewOwner()
	} else {
		for _, m := range l.members {
			var err error
			if owner, err = m.e.Owner(ctx); err != nil { // a re-entry: checked per member
				return nil, l.fail("acquire", err)
			}
		}
	}
	if l.atomic {
		return l.multi.Acquire(ctx, owner, wait, lease)
	}
	return l.acquireInOrder(ctx, owner, wait, lease)
}

// acquireInOrder takes the members one by one in key order, and gives back
// what it took if a member cannot be had.
func (l *MultiLock) acquireInOrder(ctx context.Context, owner string, wait, lease time.Duration) (context.Context, error) {
	var deadline, until time.Time
	if wait >= 0 {
		deadline = time.Now().Add(wait)
	}
	switch {
	case wait > 0:
		until = deadline // the whole call ends with the wait
	case wait == 0:
		// One bound for all the single tries, as for one lock's.
		until = time.Now().Add(l.c.opts.ReleaseTimeout)
	}
	hctx := ctx
	running := l.c.running(ctx)
	var held []context.Context
	for _, m := range l.members {
		left := Forever
		if !deadline.IsZero() {
			left = max(time.Until(deadline), 0)
		}
		wctx := hctx
		if len(held) > 0 && !running {
			// The hold it waits under is this call's own first members':
			// not running work, which a Shutdown would let go on.
			wctx = context.WithValue(hctx, inOrderKey{}, l.c.env.Reg.Of(hctx))
		}
		h, err := m.acquireAs(wctx, owner, left, lease, until)
		if err != nil {
			_ = unlockEach(l.members[:len(held)], func(i int) context.Context { return held[i] })
			return nil, err
		}
		held = append(held, h)
		hctx = h // the next member's hold is a child: losing any member cancels it
	}
	return hctx, nil
}

// usable refuses a call the multi-lock (made) cannot serve.
func (l *MultiLock) usable(ctx context.Context) error {
	if l.invalid != nil {
		return l.invalid
	}
	return checkCtx(ctx)
}

// Unlock releases every member held through ctx. A ctx that does not
// carry every member's acquisition (a hold of one member alone) is
// refused with ErrNotHeld, and nothing is released. A member's own Unlock
// of an atomic multi-lock's hold is refused as well (ErrNotHeld): the
// members of one atomic acquisition are released together.
func (l *MultiLock) Unlock(ctx context.Context) error {
	if !l.made() {
		return notMade("release")
	}
	if err := l.usable(ctx); err != nil {
		return l.fail("release", err)
	}
	hc := l.c.env.Reg.Of(ctx)
	if hc == nil {
		return l.fail("release", fmt.Errorf("%w: ctx carries no acquisition of this lock", ErrNotHeld))
	}
	var err error
	if l.atomic {
		err = l.multi.Release(ctx, hc.Owner())
	} else {
		// All or nothing, as the atomic release: a ctx that holds one
		// member alone (not the multi-lock) must not release it.
		for _, m := range l.members {
			if err := m.e.Held(ctx); err != nil {
				return l.fail("release", fmt.Errorf("%s: %w", m.Key(), err))
			}
		}
		err = unlockEach(l.members, func(int) context.Context { return ctx })
	}
	keys := strings.Join(l.Keys(), ",")
	switch g := hc.Acquisition().Hold().Group; {
	case g != nil && (endedLost(ctx) || errors.Is(err, ErrLockLost)):
		// An atomic multi-lock lost, which its members' registry did not
		// report if this release dropped them first.
		if e := (holds.Event{Owner: hc.Owner(), Cause: cmp.Or(context.Cause(ctx), err)}); g.Lost(e) {
			l.c.observeGroupLoss(g, e)
		}
	case released(ctx, err):
		observeEnd(l.c.opts.Observer, ctx, l.opts.Name, keys, "multi", hc.Owner(), hc.Acquisition().Start, err)
	}
	return err
}

// unlockEach releases members[i]'s hold hold(i), all at once: they are
// independent locks, and released in parallel the whole release is
// bounded by one ReleaseTimeout.
func unlockEach(members []*Mutex, hold func(i int) context.Context) error {
	errs := make([]error, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = m.Unlock(hold(i))
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Do acquires every member (waiting up to the multi-lock's WaitTime), runs
// fn with the ctx of the hold, and releases them when fn returns or panics.
func (l *MultiLock) Do(ctx context.Context, fn func(ctx context.Context) error) (err error) {
	if !l.made() {
		return notMade("acquire")
	}
	if fn == nil {
		return l.fail("acquire", fmt.Errorf("%w: nil fn", ErrInvalidArgument))
	}
	return do(ctx, l, l.opts, fn)
}
