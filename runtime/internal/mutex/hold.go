package mutex

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/errs"
	"github.com/lockgen/lockgen/runtime/internal/holds"
)

// The holds of a Client live in its registry (package holds): by (key,
// field), with the turns of calls in flight and the marks of unknown
// outcomes. These are the names the engine uses for it.
type (
	hold        = holds.Hold
	holdID      = holds.ID
	lockArgs    = holds.Args
	acquisition = holds.Acquisition
)

// LostError is the cause of the loss of h, found by a renewal, the lease
// clock or a re-read: a LockError (Env.Fail) wrapping errs.LockLost.
func (e *Env) LostError(h *hold, why string) error {
	return e.Fail("renew", h.Name, h.Key, fmt.Errorf("%w: %s", errs.LockLost, why))
}

// AddHold records a successful acquisition (sent at start with the given
// lease) and returns the ctx for the caller, or errs.Closed once the
// registry is closed.
func (e *Env) AddHold(parent context.Context, spec holds.Spec, args holds.Args, lease time.Duration, start time.Time) (context.Context, error) {
	if lease != Watchdog {
		spec.LeaseEnd = e.Fail("lease", spec.Name, spec.Key, fmt.Errorf("%w: fixed lease of %v ran out", errs.LockLost, lease))
	}
	hc := e.Reg.Add(parent, spec, args, lease, start)
	if hc == nil {
		return nil, errs.Closed
	}
	return hc, nil
}

// dropLost releases acq of a lost hold, and returns why it was lost (or
// that it was released already). It sends nothing and does not wait for
// the owner's turn: a give-back under way may hold that turn for as long
// as Redis is cut off, and it alone gives back what Redis may still have.
func (e *Env) dropLost(acq *holds.Acquisition) error {
	d, ok := e.Reg.Drop(acq)
	if !ok {
		return fmt.Errorf("%w: already released", errs.NotHeld)
	}
	acq.End(context.Canceled)
	return d.Lost
}

// markUnknown records that the outcome of the call in id's turn is
// unknown, and returns the mark's generation (0: err is no unknown
// outcome). The caller has the turn.
func (e *Env) markUnknown(id holds.ID, err error) uint64 {
	if !errors.Is(err, errs.OutcomeUnknown) {
		return 0
	}
	return e.Reg.MarkUnknown(id)
}

// GiveBackFor bounds a give-back: by then Redis has expired what a renewal
// sent before the loss set, unless the network held that renewal back for
// more than a lease.
func (e *Env) GiveBackFor() time.Duration { return 2 * e.Watchdog }

// taker is a Lock as the registry sees it (holds.Taker): the handle that
// took a hold, which renews its extra keys and gives back what it lost.
type taker Lock

func (t *taker) ExtraKeys(h *hold) []string {
	return t.k.extraKeys(h.Key, h.Owner, h.Count())
}

// GiveBackLost marks the outcome of the owner's holds unknown, so its
// next call (an Unlock of the lost hold) re-reads them first, and settles
// that in the background: reconcile gives back every hold Redis still has
// of the owner, whose local count is now 0.
//
// The clock ends a watchdog hold at its deadline when no renewal of it
// was confirmed in time. The renewals sent meanwhile may still have
// reached Redis, each setting a full lease again: what was lost were the
// replies (a one-way fault, replies delayed past the deadline). Redis then
// keeps the lock for an owner whose ctx is done, and every other owner
// waits out a lease that nobody uses. The scripts the give-back runs
// check the owner: nothing of another owner is touched, and a renewal
// arriving later finds the owner gone and extends nothing.
func (t *taker) GiveBackLost(h *hold) {
	m := (*Lock)(t)
	m.settleLater(h.Args, nil, m.env.GiveBackFor(), m.env.Reg.MarkLost(h))
}
