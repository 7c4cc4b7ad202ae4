package runtime

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/await"
	"github.com/lockgen/lockgen/runtime/internal/holds"
	"github.com/lockgen/lockgen/runtime/internal/mutex"
	"github.com/lockgen/lockgen/runtime/internal/scripts"
)

// MultiLock holds several locks all-or-nothing (Redisson's RedissonMultiLock).
//
// When every member is a reentrant lock and all their keys live in one
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
// The multi-lock's options give the name, the lease and the wait time; a
// member's own options give its kind's settings (QueueTimeout,
// WritersFirst) and SyncReplicas. Members with SyncReplicas are taken one
// by one, so that each acquisition is confirmed by its replicas.
type MultiLock struct {
	c       *Client
	opts    LockOptions
	members []*Mutex // sorted by key, no duplicates
	atomic  bool
}

// Keys are the members' keys in acquisition order.
func (l *MultiLock) Keys() []string {
	keys := make([]string, len(l.members))
	for i, m := range l.members {
		keys[i] = m.Key()
	}
	return keys
}

// Atomic reports whether the members are taken by one script call.
func (l *MultiLock) Atomic() bool { return l.atomic }

func (l *MultiLock) fail(op string, err error) error {
	return &LockError{Op: op, Name: l.opts.Name, Key: strings.Join(l.Keys(), ","), Err: err}
}

// Lock waits until it holds every member or ctx is done.
func (l *MultiLock) Lock(ctx context.Context) (context.Context, error) {
	return l.TryLock(ctx, Forever, l.opts.Lease)
}

// TryLock waits up to wait for all members and holds them with lease.
func (l *MultiLock) TryLock(ctx context.Context, wait, lease time.Duration) (hctx context.Context, err error) {
	owner, start := "", time.Now()
	defer func() {
		observeTry(l.c.opts.Observer, ctx, l.opts.Name, strings.Join(l.Keys(), ","), "multi", owner, start, err)
	}()
	if len(l.members) == 0 {
		return nil, l.fail("acquire", fmt.Errorf("%w: a multi-lock needs members", ErrInvalidArgument))
	}
	for _, m := range l.members {
		if err := mutex.Validate(m.Key(), lease); err != nil {
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
		return l.acquireAtomic(ctx, owner, wait, lease)
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
	if wait > 0 {
		until = deadline // the whole call ends with the wait
	}
	hctx := ctx
	var held []context.Context
	for _, m := range l.members {
		left := Forever
		if !deadline.IsZero() {
			left = max(time.Until(deadline), 0)
		}
		h, err := m.acquireAs(hctx, owner, left, lease, until)
		if err != nil {
			for i := len(held) - 1; i >= 0; i-- {
				_ = l.members[i].Unlock(held[i])
			}
			return nil, err
		}
		held = append(held, h)
		hctx = h // the next member's hold is a child: losing any member cancels it
	}
	return hctx, nil
}

// acquireAtomic takes every member with one script call per attempt, and
// sleeps on the channel of the member that blocked it.
func (l *MultiLock) acquireAtomic(ctx context.Context, owner string, wait, lease time.Duration) (context.Context, error) {
	c := l.c
	mw := l.newMultiWait(owner, lease)
	if err := c.env.Waits.Await(ctx, await.Spec{At: mw, Dynamic: true, Wait: wait}, mw.try); err != nil {
		return nil, l.fail("acquire", err)
	}
	defer c.env.Reg.ExitAll(mw.ids)
	hctx := ctx
	for i, m := range l.members {
		h, err := c.env.AddHold(hctx, m.e.Spec(), mw.args[i], lease, mw.sent)
		if err != nil {
			// Closed while acquiring: forget the members recorded so far
			// and give every member back.
			for hc := c.env.Reg.Of(hctx); hc != nil && hc != c.env.Reg.Of(ctx); hc = hc.Parent() {
				_, _ = c.env.Reg.Drop(hc.Acquisition())
				hc.Acquisition().End(ErrClosed)
			}
			taken := make([]int, len(mw.counts))
			for i, n := range mw.counts {
				taken[i] = n + 1
			}
			_, _ = l.sendRelease(ctx, mw.args, taken, c.opts.WatchdogTimeout)
			return nil, l.fail("acquire", err)
		}
		hctx = h
	}
	return hctx, nil
}

// A multiWait is one atomic acquisition of a MultiLock in progress.
type multiWait struct {
	l        *MultiLock
	owner    string
	lease    time.Duration
	args     []holds.Args
	ids      []holds.ID
	counts   []int // the owner's hold counts before the attempt
	blocking int   // the member that blocked the last try
	sent     time.Time
}

func (l *MultiLock) newMultiWait(owner string, lease time.Duration) *multiWait {
	w := &multiWait{l: l, owner: owner, lease: lease, args: make([]holds.Args, len(l.members)),
		ids: make([]holds.ID, len(l.members)), counts: make([]int, len(l.members))}
	for i, m := range l.members {
		w.args[i] = holds.NewArgs(m.Key(), owner, owner)
		w.ids[i] = holds.ID{Key: m.Key(), Field: owner}
	}
	return w
}

func (w *multiWait) WaitChannel() string { return mutex.LockChannel(w.l.members[w.blocking].Key()) }
func (w *multiWait) WaitKey() string     { return w.l.members[w.blocking].Key() }

// try makes one attempt, in the owner's turn on every member (in key
// order), kept on success until the holds are recorded, as
// Mutex.tryAcquire does.
func (w *multiWait) try(ctx context.Context) (took bool, _ time.Duration, _ error) {
	l, c := w.l, w.l.c
	px, err := c.env.Reg.EnterAll(ctx, w.ids, w.lease, w.counts)
	if err != nil {
		return false, 0, err
	}
	defer func() {
		if !took {
			c.env.Reg.ExitAll(w.ids)
		}
	}()
	for i, m := range l.members {
		if err := m.e.Reconcile(ctx, w.args[i]); err != nil {
			return false, 0, err
		}
	}
	w.sent = time.Now()
	marker := mutex.RequestMarker(l.members[0].Key(), c.env.NewRequestID())
	cmdArgs := make([]any, 3, 3+2*len(w.args)+4)
	for _, a := range w.args {
		cmdArgs = append(cmdArgs, a.Key)
	}
	cmdArgs = append(cmdArgs, marker, c.env.LeaseArg(px), w.owner, c.env.MarkerTTL)
	for _, n := range w.counts {
		cmdArgs = append(cmdArgs, n)
	}
	res, err := scripts.MultiAcquire.Run(ctx, c.env.RDB, len(w.args)+1, cmdArgs).Int64Slice()
	switch {
	case err == nil && res[0] == 0 && res[1] == 0:
		return true, 0, nil
	case err == nil && res[1] == mutex.ReplyHoldGone:
		return false, 0, fmt.Errorf("%w: the hold of %s this re-entry counts on is gone (its lease ran out or the key was deleted)", ErrLockLost, l.members[res[0]-1].Key())
	case err == nil && res[0] > 0:
		w.blocking = int(res[0]) - 1
		return false, time.Duration(res[1]) * time.Millisecond, nil
	case err == nil:
		return false, 0, fmt.Errorf("%w: the attempt was settled as aborted", ErrNotAcquired)
	case scripts.IsReply(err), scripts.NotSent(err):
		return false, 0, err
	}
	if p := scripts.Abandoned(err); p != nil {
		l.resolveLate(p, w.args, w.ids, w.counts[0], marker, px) // gives back what a late reply took
		return false, 0, fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
	}
	// The script takes all members or none: the first one's count tells
	// (no other call of this owner on them runs meanwhile).
	settled, serr := l.members[0].e.SettleRequest(ctx, nil, w.args[0], marker, w.counts[0])
	if serr != nil {
		for _, id := range w.ids {
			c.env.MarkUnknown(id, serr)
		}
		return false, 0, serr
	}
	if settled {
		return true, 0, nil
	}
	return false, 0, err
}

// Unlock releases every member held through ctx.
func (l *MultiLock) Unlock(ctx context.Context) error {
	hc := l.c.env.Reg.Of(ctx)
	if hc == nil {
		return l.fail("release", fmt.Errorf("%w: ctx carries no acquisition of this lock", ErrNotHeld))
	}
	defer observeRelease(l.c.opts.Observer, ctx, l.opts.Name, strings.Join(l.Keys(), ","), "multi", hc.Owner(), hc.Acquisition().Start)
	if !l.atomic {
		// The members are independent locks: released at once, so that
		// the whole Unlock is bounded by one ReleaseTimeout.
		errs := make([]error, len(l.members))
		var wg sync.WaitGroup
		for i, m := range l.members {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = m.Unlock(ctx)
			}()
		}
		wg.Wait()
		return errors.Join(errs...)
	}
	args := make([]holds.Args, len(l.members))
	for i, m := range l.members {
		args[i] = holds.NewArgs(m.Key(), hc.Owner(), hc.Owner())
	}
	return l.releaseAtomic(ctx, args, ctx)
}

// releaseAtomic drops one hold of every member held through holdCtx with
// one script call. Members whose hold was lost are not sent: the owner may
// hold them anew by now.
func (l *MultiLock) releaseAtomic(ctx context.Context, args []holds.Args, holdCtx context.Context) error {
	c := l.c
	hc := c.env.Reg.Of(holdCtx)
	acqs := make([]*holds.Acquisition, len(l.members))
	for i, m := range l.members {
		if acqs[i] = holds.Find(hc, holds.ID{Key: m.Key(), Field: args[i].FieldID()}); acqs[i] == nil {
			return l.fail("release", fmt.Errorf("%w: ctx carries no acquisition of %s", ErrNotHeld, m.Key()))
		}
	}
	var lost error
	// Lost members are dropped without their owner's turn, which a
	// give-back may hold while Redis is cut off (giveback.go).
	var live []int
	for i, acq := range acqs {
		if !acq.Hold().Lost() {
			live = append(live, i)
			continue
		}
		err := c.env.DropLost(acq)
		if errors.Is(err, ErrNotHeld) {
			return l.fail("release", err)
		}
		lost = cmp.Or(lost, err)
	}
	ids := make([]holds.ID, len(live))
	for j, i := range live {
		ids[j] = holds.ID{Key: acqs[i].Hold().Key, Field: acqs[i].Hold().Field}
	}
	counts := make([]int, len(ids))
	_, _ = c.env.Reg.EnterAll(context.Background(), ids, 0, counts) // never fails: no deadline
	defer c.env.Reg.ExitAll(ids)
	rel := l.reconcileLive(acqs, args, live, ids)
	// Members that stay held keep what their holds count on (the longest
	// of them: one lease goes to all); nothing more, so a fixed lease is
	// not stretched to the watchdog's.
	lease := mutex.MinLease
	var send []holds.Args
	var sendCounts []int
	for _, i := range live {
		acq := acqs[i]
		d, ok := c.env.Reg.Drop(acq)
		if !ok {
			return l.fail("release", fmt.Errorf("%w: already released", ErrNotHeld))
		}
		acq.End(context.Canceled) // before the release is sent (see Mutex.Unlock)
		if d.Lost != nil {
			lost = cmp.Or(lost, d.Lost)
			continue
		}
		lease = max(lease, d.Lease)
		send = append(send, args[i])
		sendCounts = append(sendCounts, d.Count)
	}
	res, err := l.sendRelease(rel, send, sendCounts, lease)
	for i, a := range send {
		if sendCounts[i] > 1 {
			c.env.MarkUnknown(holds.ID{Key: a.Key.(string), Field: a.FieldID()}, err)
		}
	}
	switch {
	case err != nil:
		return l.fail("release", err)
	case lost != nil:
		return l.fail("release", lost)
	case slices.Contains(res, -1):
		return l.fail("release", fmt.Errorf("%w: a member's lease ran out or its key was deleted before the release", ErrLockLost))
	}
	return nil
}

// reconcileLive brings back to the client's the counts in Redis of the
// live members (live, ids: their indexes and hold ids) whose last outcome
// was unknown, in their turns, and returns the ctx of the release that
// follows: the re-reads and the release share one ReleaseTimeout, so an
// Unlock returns within one whatever Redis does.
func (l *MultiLock) reconcileLive(acqs []*holds.Acquisition, args []holds.Args, live []int, ids []holds.ID) context.Context {
	c, rel := l.c, acqs[0].Parent
	var limit time.Time
	for j, id := range ids {
		i := live[j]
		if !c.env.Reg.Unknown(id) {
			continue
		}
		if limit.IsZero() {
			limit = c.env.Calls.Limit(rel)
			rel = scripts.WithCallBound(rel, limit)
		}
		rctx, cancel := c.env.Calls.DetachedUntil(acqs[i].Parent, limit)
		c.env.Reg.WaitLate(rctx, id)
		_ = l.members[i].e.Reconcile(rctx, args[i])
		cancel()
	}
	return rel
}

// sendRelease runs multi_release.lua for members, whose owner holds them
// counts times each, resending it on transport errors (the counts make
// resends harmless).
func (l *MultiLock) sendRelease(ctx context.Context, members []holds.Args, counts []int, lease time.Duration) ([]int64, error) {
	if len(members) == 0 {
		return nil, nil
	}
	c := l.c
	cmdArgs := make([]any, 3, 3+3*len(members)+3)
	for _, a := range members {
		cmdArgs = append(cmdArgs, a.Key, mutex.LockChannel(a.Key.(string)))
	}
	cmdArgs = append(cmdArgs, c.env.LeaseArg(lease), members[0].Owner, c.env.Publish)
	for _, n := range counts {
		cmdArgs = append(cmdArgs, n)
	}
	var res []int64
	_, err := c.env.Calls.Retry(ctx, func(ctx context.Context) (int64, error) {
		var err error
		res, err = scripts.MultiRelease.Run(ctx, c.env.RDB, 2*len(members), cmdArgs).Int64Slice()
		return 0, err
	})
	return res, err
}

// Do acquires every member (waiting up to the multi-lock's WaitTime), runs
// fn with the ctx of the hold, and releases them when fn returns or panics.
func (l *MultiLock) Do(ctx context.Context, fn func(ctx context.Context) error) (err error) {
	if fn == nil {
		return l.fail("acquire", fmt.Errorf("%w: nil fn", ErrInvalidArgument))
	}
	return do(ctx, l, l.opts, fn)
}
