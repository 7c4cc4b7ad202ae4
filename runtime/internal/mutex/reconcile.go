package mutex

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime/internal/errs"
	"github.com/lockgen/lockgen/runtime/internal/lockenv"
	"github.com/lockgen/lockgen/runtime/internal/scripts"
	"github.com/lockgen/lockgen/runtime/internal/settle"
)

// reconcile brings the owner's count of a in Redis back to the client's
// after an unknown outcome (in the caller's turn): else the scripts, which
// tell a resend by the count, would take the next request for a copy of
// the lost one. A hold Redis has fewer counts of is lost, and given back
// whole; extra counts are given back (the last with a full release, which
// wakes a waiter).
func (m *Lock) reconcile(ctx context.Context, via redis.UniversalClient, a lockArgs) error {
	c := m.env
	id := holdID{Key: m.key, Field: a.FieldID()}
	if !c.Reg.Unknown(id) {
		return nil
	}
	if c.Reg.Late(id) {
		return fmt.Errorf("%w: a call abandoned at its deadline has had no reply yet", errs.OutcomeUnknown)
	}
	count, px := c.Reg.State(id, 0)
	keep := count  // what Redis should have of the owner
	for range 64 { // each round gives one back, or finds the count changed
		n, err := scripts.Do(ctx, via, "hget", m.key, a.FieldID()).Int()
		if err != nil && !errors.Is(err, redis.Nil) {
			return fmt.Errorf("%w: re-reading the hold after an unknown outcome: %w", errs.OutcomeUnknown, err)
		}
		if n < keep {
			c.Reg.Lose(id, func(h *hold) error {
				return c.LostError(h, fmt.Sprintf("after an unknown outcome Redis has %d of this owner's %d holds", n, count))
			})
			keep = 0
		}
		if n <= keep {
			break
		}
		if _, err := m.release(ctx, via, a, n == 1, px, n); err != nil && !errors.Is(err, errFreedUnseen) {
			return fmt.Errorf("%w: giving back a hold taken by a lost request: %w", errs.OutcomeUnknown, err)
		}
	}
	c.Reg.DropMark(id, 0)
	return nil
}

// settleLater settles in the background an acquire whose reply and
// settlement were both lost (at; nil: only the count to bring back), for
// an owner that may never call again (else the lock would stay taken
// until its lease ran out); reconcile gives back what it took. It stops
// when another call of the owner replaced or cleared the mark gen, and
// gives up (dropping it) after lease.
func (m *Lock) settleLater(a lockArgs, at *attempt, lease time.Duration, gen uint64) {
	c := m.env
	id := holdID{Key: m.key, Field: a.FieldID()}
	c.Settler.Add(settle.Job{
		Try:   func(ctx context.Context) bool { return m.settleOnce(ctx, id, a, at, gen) },
		Until: time.Now().Add(lease),
		Quit:  func() { m.dropMark(id, gen) },
	})
}

// dropMark drops the unknown mark gen of id in its turn: a call of the
// owner in flight may be about to leave a newer mark, which is not ours.
func (m *Lock) dropMark(id holdID, gen uint64) {
	_, _, _ = m.env.Reg.Enter(context.Background(), id, 0)
	m.env.Reg.DropMark(id, gen)
	m.env.Reg.Exit(id)
}

// settleOnce is one attempt of settleLater, in id's turn; true: done.
func (m *Lock) settleOnce(ctx context.Context, id holdID, a lockArgs, at *attempt, gen uint64) bool {
	c := m.env
	if _, _, err := c.Reg.Enter(ctx, id, 0); err != nil {
		return false
	}
	defer c.Reg.Exit(id)
	if c.Reg.Mark(id) != gen {
		return true // a later call of the owner reconciled it, or took over
	}
	if at != nil {
		at := *at
		at.via = c.Renewal
		if _, err := m.settleTry(ctx, a, at); err != nil {
			return false
		}
	}
	return m.reconcile(ctx, c.Renewal, a) == nil
}

// readFence sets *fence to the token counter, for an acquisition whose reply was lost.
func (m *Lock) readFence(ctx context.Context, fence *int64) error {
	n, err := m.env.Calls.Retry(ctx, func(ctx context.Context) (int64, error) {
		return scripts.Do(ctx, m.env.RDB, "get", tokenKey(m.key)).Int64()
	})
	if err == nil {
		*fence = n
	}
	return err
}

// settleTry decides an acquire attempt at whose reply was lost (settle.lua,
// for every kind: each counts its holds in its own field): it took the
// lock (true) or never will. A fresh fair waiter found taken is confirmed
// by reapply: a release may have granted it the lock before the try.
func (m *Lock) settleTry(ctx context.Context, a lockArgs, at attempt) (bool, error) {
	c := m.env
	n, err := c.Calls.Retry(ctx, func(ctx context.Context) (int64, error) {
		return scripts.Settle.Run(ctx, at.via, 2, []any{
			3: a.Key, at.marker,
			a.Field, at.count, c.MarkerTTL,
		}).Int64()
	})
	if err != nil || n != 1 || at.count != 0 || !m.takesGrants() {
		return n == 1, err
	}
	return m.reapply(ctx, a, at)
}

// reapply confirms a new acquisition settle.lua found taken that may be a
// grant (its lease cut to the waiter's record): a copy of the request
// re-applies the request's lease (count.lua), or is refused when the hold
// is gone.
func (m *Lock) reapply(ctx context.Context, a lockArgs, at attempt) (bool, error) {
	at.waiting, at.grant, at.queued = false, false, false // one try, never a join
	n, err := m.env.Calls.Retry(ctx, func(ctx context.Context) (int64, error) {
		return m.kind.acquire(ctx, m, a, at)
	})
	return err == nil && n == 0, err
}

// resolveLate takes over an acquire attempt at that its caller abandoned
// (lockenv.Replied). No call of the owner reconciles until its outcome
// comes (holds.Registry.Abandon); then what it took is given back
// (settleLater, settling it first when no reply came), and a waiter it
// queued is withdrawn.
func (m *Lock) resolveLate(ctx context.Context, p *scripts.Pending, a lockArgs, at attempt, px time.Duration) {
	id := holdID{Key: m.key, Field: a.FieldID()}
	gen := m.env.Reg.Abandon(id)
	m.env.Then(p, func(cmd *redis.Cmd) {
		unsettled := &at
		if lockenv.Replied(cmd.Err()) {
			unsettled = nil
		}
		m.settleLater(a, unsettled, px, gen)
		m.env.Reg.Landed(id)
		if at.waiting {
			m.leave(ctx, a)
		}
	})
}
