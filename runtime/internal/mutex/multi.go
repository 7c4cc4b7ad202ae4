package mutex

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime/internal/await"
	"github.com/lockgen/lockgen/runtime/internal/calls"
	"github.com/lockgen/lockgen/runtime/internal/errs"
	"github.com/lockgen/lockgen/runtime/internal/holds"
	"github.com/lockgen/lockgen/runtime/internal/lockenv"
	"github.com/lockgen/lockgen/runtime/internal/scripts"
	"github.com/lockgen/lockgen/runtime/internal/settle"
)

// Multi is the engine of an atomic multi-lock (runtime.MultiLock): its
// members, reentrant locks in one cluster slot, are taken and released
// together by one script call each: all or nothing.
type Multi struct {
	env   *Env
	name  string
	locks []*Lock // sorted by key, no duplicates
}

// NewMulti returns the engine of the atomic multi-lock name over locks.
func NewMulti(env *Env, name string, locks []*Lock) *Multi {
	return &Multi{env: env, name: name, locks: locks}
}

func (l *Multi) fail(op string, err error) error {
	return l.env.Fail(op, l.name, l.keys(), err)
}

// keys are the members' keys, comma-separated, as errors and events name
// the multi-lock.
func (l *Multi) keys() string {
	keys := make([]string, len(l.locks))
	for i, m := range l.locks {
		keys[i] = m.key
	}
	return strings.Join(keys, ",")
}

// Acquire takes every member as owner, sleeping on the channel of the member that blocked it.
func (l *Multi) Acquire(ctx context.Context, owner string, wait, lease time.Duration) (context.Context, error) {
	c := l.env
	c.Acquiring.Add(1)
	defer c.Acquiring.Add(-1)
	n := len(l.locks)
	mw := &multiWait{l: l, owner: owner, lease: lease, args: make([]holds.Args, n), ids: make([]holds.ID, n), counts: make([]int, n)}
	for i, m := range l.locks {
		mw.args[i] = holds.NewArgs(m.key, owner, owner)
		mw.ids[i] = holds.ID{Key: m.key, Field: owner}
	}
	if err := c.Waits.Await(ctx, await.Spec{At: mw, Dynamic: true, Wait: wait}, mw.try); err != nil {
		return nil, l.fail("acquire", err)
	}
	defer c.Reg.ExitAll(mw.ids)
	hctx := ctx
	group := &holds.Group{Name: l.name, Keys: l.keys()}
	for i, m := range l.locks {
		spec := m.spec()
		spec.Group = group
		h, err := c.AddHold(hctx, spec, mw.args[i], lease, mw.sent)
		if err != nil {
			// Closed while acquiring: forget and give back every member.
			for hc := c.Reg.Of(hctx); hc != nil && hc != c.Reg.Of(ctx); hc = hc.Parent() {
				_, _ = c.Reg.Drop(hc.Acquisition())
				hc.Acquisition().End(errs.Closed)
			}
			taken := make([]int, len(mw.counts))
			leases := make([]time.Duration, len(mw.counts))
			for i, n := range mw.counts {
				taken[i], leases[i] = n+1, c.Watchdog
			}
			_, _ = l.sendRelease(ctx, mw.args, taken, leases)
			return nil, l.fail("acquire", err)
		}
		hctx = h
	}
	return hctx, nil
}

// A multiWait is one atomic acquisition of a MultiLock in progress.
type multiWait struct {
	l        *Multi
	owner    string
	lease    time.Duration
	args     []holds.Args
	ids      []holds.ID
	counts   []int // the owner's hold counts before the attempt
	blocking int   // the member that blocked the last try
	sent     time.Time
}

func (w *multiWait) WaitChannel() string { return LockChannel(w.l.locks[w.blocking].key) }
func (w *multiWait) WaitKey() string     { return w.l.locks[w.blocking].key }

// try makes one attempt in the owner's turn on every member (in key
// order), kept on success until the holds are recorded (as Acquiring.try).
func (w *multiWait) try(ctx context.Context) (took bool, _ time.Duration, _ error) {
	l, c := w.l, w.l.env
	pxs := make([]time.Duration, len(w.ids))
	px, err := c.Reg.EnterAll(ctx, w.ids, w.lease, w.counts, pxs)
	if err != nil {
		return false, 0, err
	}
	defer func() {
		if !took {
			c.Reg.ExitAll(w.ids)
		}
	}()
	for i, m := range l.locks {
		if err := m.reconcile(ctx, c.RDB, w.args[i]); err != nil {
			return false, 0, err
		}
	}
	w.sent = time.Now()
	marker := lockenv.RequestMarker(l.locks[0].key, c.NewRequestID())
	cmdArgs := make([]any, 3, 3+3*len(w.args)+4)
	for _, a := range w.args {
		cmdArgs = append(cmdArgs, a.Key)
	}
	cmdArgs = append(cmdArgs, marker, c.LeaseArg(px), w.owner, c.MarkerTTL)
	for _, n := range w.counts {
		cmdArgs = append(cmdArgs, n)
	}
	for _, p := range pxs { // each member keeps its own lease
		cmdArgs = append(cmdArgs, c.LeaseArg(p))
	}
	res, err := scripts.MultiAcquire.Run(ctx, c.RDB, len(w.args)+1, cmdArgs).Int64Slice()
	switch {
	case err == nil && res[0] == 0 && res[1] == 0:
		return true, 0, nil
	case err == nil && res[1] == replyHoldGone:
		return false, 0, fmt.Errorf("%w: the hold of %s this re-entry counts on is gone (its lease ran out or the key was deleted)", errs.LockLost, l.locks[res[0]-1].key)
	case err == nil && res[0] > 0:
		w.blocking = int(res[0]) - 1
		return false, time.Duration(res[1]) * time.Millisecond, nil
	case err == nil:
		return false, 0, fmt.Errorf("%w: the attempt was settled as aborted", errs.NotAcquired)
	case scripts.IsReply(err), scripts.NotSent(err):
		return false, 0, err
	}
	if p := scripts.Abandoned(err); p != nil {
		w.resolveLate(p, marker, px)
		return false, 0, fmt.Errorf("%w: %w", errs.OutcomeUnknown, err)
	}
	// The script takes all members or none: the first one's count tells
	// (no other call of this owner on them runs meanwhile).
	settled, serr := l.locks[0].settleTry(ctx, w.args[0], attempt{via: c.RDB, marker: marker, count: w.counts[0]})
	if serr != nil {
		for _, id := range w.ids {
			c.MarkUnknown(id, serr)
		}
		return false, 0, serr
	}
	if settled {
		return true, 0, nil
	}
	return false, 0, err
}

// Release drops one hold of every member that owner holds through ctx,
// with one script call. Members whose hold was lost are not sent: the
// owner may hold them anew by now.
func (l *Multi) Release(ctx context.Context, owner string) error {
	c := l.env
	hc := c.Reg.Of(ctx)
	acqs := make([]*holds.Acquisition, len(l.locks))
	for i, m := range l.locks {
		var err error
		if acqs[i], err = m.held(hc); err != nil {
			return l.fail("release", fmt.Errorf("%s: %w", m.key, err))
		}
	}
	// Lost members are dropped without the turn, which a give-back may
	// hold while Redis is cut off (DropLost).
	var lost error
	var live []int
	var ids []holds.ID
	for i, acq := range acqs {
		if !acq.Hold().Lost() {
			live, ids = append(live, i), append(ids, holds.ID{Key: l.locks[i].key, Field: owner})
			continue
		}
		err := c.DropLost(acq)
		if errors.Is(err, errs.NotHeld) {
			return l.fail("release", err)
		}
		lost = cmp.Or(lost, err)
	}
	_, _ = c.Reg.EnterAll(context.Background(), ids, 0, make([]int, len(ids)), nil) // never fails: no deadline
	defer c.Reg.ExitAll(ids)
	rel := l.reconcileLive(acqs, live, ids)
	// Members that stay held keep the lease their own holds count on.
	var send []holds.Args
	var counts, sent []int // sent: the index of each of send in l.locks
	var leases []time.Duration
	for _, i := range live {
		d, ok := c.Reg.Drop(acqs[i])
		if !ok {
			return l.fail("release", fmt.Errorf("%w: already released", errs.NotHeld))
		}
		acqs[i].End(context.Canceled) // before the release is sent (see Lock.Release)
		if d.Lost != nil {
			lost = cmp.Or(lost, d.Lost)
			continue
		}
		send, counts = append(send, acqs[i].Hold().Args), append(counts, d.Count)
		sent = append(sent, i)
		leases = append(leases, max(d.Lease, lockenv.MinLease))
	}
	res, err := l.sendRelease(c.Calls.Yield(rel, l.locks[0].key), send, counts, leases)
	for i, a := range send { // as in Lock.Release
		id := holds.ID{Key: a.Key.(string), Field: a.FieldID()}
		switch {
		case err == nil:
		case counts[i] > 1:
			c.Reg.MarkUnknown(id)
		case calls.Unfinished(err):
			l.locks[sent[i]].giveBackUnreleased(acqs[sent[i]].Hold(), id)
		}
	}
	switch {
	case err != nil:
		return l.fail("release", err)
	case lost != nil:
		return l.fail("release", lost)
	case slices.Contains(res, -1):
		return l.fail("release", fmt.Errorf("%w: a member's lease ran out or its key was deleted before the release", errs.LockLost))
	}
	return nil
}

// reconcileLive re-reads the counts of the live members (live, ids: their
// indexes and hold ids) whose outcome was unknown, in their turns, and
// returns the release's ctx: re-reads and release share one
// ReleaseTimeout, so an Unlock returns within one whatever Redis does.
func (l *Multi) reconcileLive(acqs []*holds.Acquisition, live []int, ids []holds.ID) context.Context {
	c, rel := l.env, acqs[0].Parent
	var limit time.Time
	for j, id := range ids {
		i := live[j]
		if !c.Reg.Unknown(id) {
			continue
		}
		if limit.IsZero() {
			limit = c.Calls.Limit(rel)
			rel = scripts.WithCallBound(rel, limit)
		}
		rctx, cancel := c.Calls.DetachedUntil(acqs[i].Parent, limit)
		c.Reg.WaitLate(rctx, id)
		_ = l.locks[i].reconcile(rctx, c.RDB, acqs[i].Hold().Args)
		cancel()
	}
	return rel
}

// sendRelease runs multi_release.lua for members held counts times each,
// re-applying leases where holds remain, resent on transport errors (the
// counts make that harmless); cut by its limit, it ends as RetryRelease
// does (calls.Unfinished).
func (l *Multi) sendRelease(ctx context.Context, members []holds.Args, counts []int, leases []time.Duration) ([]int64, error) {
	if len(members) == 0 {
		return nil, nil
	}
	c := l.env
	cmdArgs := make([]any, 3, 3+4*len(members)+3)
	for _, a := range members {
		cmdArgs = append(cmdArgs, a.Key, LockChannel(a.Key.(string)))
	}
	cmdArgs = append(cmdArgs, c.LeaseArg(slices.Max(leases)), members[0].Owner, c.Publish)
	for _, n := range counts {
		cmdArgs = append(cmdArgs, n)
	}
	for _, p := range leases {
		cmdArgs = append(cmdArgs, c.LeaseArg(p))
	}
	var res []int64
	_, _, err := c.Calls.RetryRelease(ctx, func(ctx context.Context) (int64, error) {
		var err error
		res, err = scripts.MultiRelease.Run(ctx, c.RDB, 2*len(members), cmdArgs).Int64Slice()
		return 0, err
	})
	return res, err
}

// resolveLate is Lock.resolveLate for an attempt on every member: what it
// took is given back member by member, once nothing of the request can
// still arrive (after the first member's settlement, which decides them
// all, when no reply came).
func (w *multiWait) resolveLate(p *scripts.Pending, marker string, px time.Duration) {
	l, c, args, ids, count0 := w.l, w.l.env, w.args, w.ids, w.counts[0]
	gens := make([]uint64, len(ids))
	for i, id := range ids {
		gens[i] = c.Reg.Abandon(id)
	}
	c.Then(p, func(cmd *redis.Cmd) {
		defer func() {
			for _, id := range ids {
				c.Reg.Landed(id)
			}
		}()
		settled := lockenv.Replied(cmd.Err())
		c.Settler.Add(settle.Job{
			Try: func(ctx context.Context) bool {
				if !settled {
					if _, err := l.locks[0].settleTry(ctx, args[0], attempt{via: c.Renewal, marker: marker, count: count0}); err != nil {
						return false
					}
					settled = true
				}
				for i, m := range l.locks {
					if !m.settleOnce(ctx, ids[i], args[i], nil, gens[i]) {
						return false
					}
				}
				return true
			},
			Until: time.Now().Add(px),
			Quit: func() {
				for i, m := range l.locks {
					m.dropMark(ids[i], gens[i])
				}
			},
		})
	})
}
