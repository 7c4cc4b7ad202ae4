package runtime

import (
	"context"
	"fmt"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/lockenv"
	"github.com/lockgen/lockgen/runtime/internal/redlock"
)

// RedLock is a lock over independent Redis masters (Options.RedLockNodes),
// held when a quorum of them (a majority by default) grant it: the RedLock
// algorithm. On every node the lock is a reentrant lock with Redisson's
// layout, taken with the same owner token.
//
// An acquisition tries every node in parallel once; it holds the lock when
// at least a quorum granted it and the validity left (lease − time spent −
// drift of 1% + 5ms) is positive. Otherwise it releases what it got and,
// while the wait time lasts, tries again: after a short random pause when
// the vote split (another waiter got some nodes), else once a release on
// any node wakes it (it sleeps on the lock's channel of every node, as a
// lock's waiter does on one; key tracking sees a lock freed by expiry). With
// the watchdog lease each node's hold is renewed by that node's watchdog;
// the hold's ctx is cancelled with ErrLockLost once fewer than a quorum of
// nodes still hold it. A fixed-lease hold's ctx ends when its validity does.
//
// Redisson deprecated RedLock: its safety rests on bounded clock drift and
// process pauses, which the algorithm cannot check. See the README for what
// fencing tokens and WAIT add.
type RedLock struct {
	c    *Client
	opts LockOptions
	e    *redlock.Lock // the engine (package redlock)
}

// made reports whether a Client made l (see errNotMade).
func (l *RedLock) made() bool { return l != nil && l.e != nil }

// Key is the Redis key of the lock on every node.
func (l *RedLock) Key() string {
	if !l.made() {
		return ""
	}
	return l.e.Key()
}

func (l *RedLock) fail(op string, err error) error { return fail(op, l.opts.Name, l.e.Key(), err) }

// Lock waits until it holds the lock on a quorum or ctx is done.
func (l *RedLock) Lock(ctx context.Context) (context.Context, error) {
	if !l.made() {
		return nil, notMade("acquire")
	}
	return l.TryLock(ctx, Forever, l.opts.Lease)
}

// TryLock waits up to wait for a quorum of nodes to grant the lock, with
// lease (Watchdog or fixed). While fewer than a quorum of nodes answer, it
// tries again within the wait (they may be back), and fails with ErrQuorum
// when the wait ends so (a wait of 0: its one round), or at once, wrapping
// their errors, when nodes answered with errors no retry mends; it fails with
// ErrNotAcquired when they answer but others hold the lock for the whole
// wait.
func (l *RedLock) TryLock(ctx context.Context, wait, lease time.Duration) (hctx context.Context, err error) {
	if !l.made() {
		return nil, notMade("acquire")
	}
	if err := checkCtx(ctx); err != nil {
		return nil, l.fail("acquire", err)
	}
	owner, begin := "", time.Now()
	defer func() {
		observeTry(l.c.opts.Observer, ctx, l.opts.Name, l.e.Key(), "red", owner, begin, err)
		if err == nil {
			observeLoss(l.c.opts.Observer, hctx, l.opts.Name, l.e.Key(), "red", owner)
		}
	}()
	switch {
	case l.e.Nodes() == 0:
		return nil, l.fail("acquire", fmt.Errorf("%w: no RedLock nodes (set Options.RedLockNodes)", ErrInvalidArgument))
	case l.e.Quorum() > l.e.Nodes():
		return nil, l.fail("acquire", fmt.Errorf("%w: Quorum %d is more than the %d nodes (set at most %d, or 0 for a majority)", ErrInvalidArgument, l.e.Quorum(), l.e.Nodes(), l.e.Nodes()))
	case l.e.Quorum() <= l.e.Nodes()/2:
		return nil, l.fail("acquire", fmt.Errorf("%w: Quorum %d of %d nodes is not a majority: two owners could each be granted the lock by as many nodes (set at least %d, or 0 for a majority)",
			ErrInvalidArgument, l.e.Quorum(), l.e.Nodes(), l.e.Nodes()/2+1))
	}
	if err := lockenv.Validate(l.e.Key(), lease); err != nil {
		return nil, l.fail("acquire", err)
	}
	owner = l.e.Owner(ctx)
	return l.e.Acquire(ctx, owner, wait, lease)
}

// Unlock releases the acquisition ctx carries on every node.
func (l *RedLock) Unlock(ctx context.Context) error {
	if !l.made() {
		return notMade("release")
	}
	if err := checkCtx(ctx); err != nil {
		return l.fail("release", err)
	}
	owner, start, err := l.e.Release(ctx)
	if owner != "" && released(ctx, err) {
		observeEnd(l.c.opts.Observer, ctx, l.opts.Name, l.e.Key(), "red", owner, start, err)
	}
	return err
}

// Do acquires the lock with the RedLock's options, runs fn with the ctx of
// the hold, and releases it when fn returns or panics.
func (l *RedLock) Do(ctx context.Context, fn func(ctx context.Context) error) (err error) {
	if !l.made() {
		return notMade("acquire")
	}
	if fn == nil {
		return l.fail("acquire", fmt.Errorf("%w: nil fn", ErrInvalidArgument))
	}
	return do(ctx, l, l.opts, fn)
}
