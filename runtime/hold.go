package runtime

import (
	"context"
	"fmt"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/holds"
)

// The holds of a Client live in its registry (package holds): by (key,
// field), with the turns of calls in flight and the marks of unknown
// outcomes. These are the names the lock handles use for it.
type (
	hold        = holds.Hold
	holdID      = holds.ID
	lockArgs    = holds.Args
	acquisition = holds.Acquisition
	holdContext = holds.Context
)

var newLockArgs = holds.NewArgs

// lostError is the cause of the loss of h, found by a renewal, the lease
// clock or a re-read.
func lostError(h *hold, why string) error {
	return &LockError{Op: "renew", Name: h.Name, Key: h.Key, Err: fmt.Errorf("%w: %s", ErrLockLost, why)}
}

// holdSpec is what a new acquisition of m is of.
func (m *Mutex) holdSpec() holds.Spec {
	_, read := m.k.(readSide) // only a read hold renews keys besides its own
	return holds.Spec{Name: m.opts.Name, Key: m.key, Kind: kindName(m.k), From: (*mutexTaker)(m), Extra: read}
}

// addHold records a successful acquisition (sent at start with the given
// lease) and returns the ctx for the caller.
func addHold(reg *holds.Registry, parent context.Context, spec holds.Spec, args lockArgs, lease time.Duration, start time.Time) (context.Context, error) {
	if lease != Watchdog {
		spec.LeaseEnd = &LockError{Op: "lease", Name: spec.Name, Key: spec.Key,
			Err: fmt.Errorf("%w: fixed lease of %v ran out", ErrLockLost, lease)}
	}
	hc := reg.Add(parent, spec, args, lease, start)
	if hc == nil {
		return nil, ErrClosed
	}
	return hc, nil
}

// dropLost releases acq of a lost hold, and returns why it was lost (or
// that it was released already). It sends nothing and does not wait for
// the owner's turn: a give-back under way may hold that turn for as long
// as Redis is cut off, and it alone gives back what Redis may still have.
func dropLost(reg *holds.Registry, acq *acquisition) error {
	d, ok := reg.Drop(acq)
	if !ok {
		return fmt.Errorf("%w: already released", ErrNotHeld)
	}
	acq.End(context.Canceled)
	return d.Lost
}

// mutexTaker is a Mutex as the registry sees it: the handle that took a
// hold, which renews its extra keys and gives back what it lost.
type mutexTaker Mutex

func (t *mutexTaker) ExtraKeys(h *hold) []string {
	return t.k.extraKeys(h.Key, h.Owner, h.Count())
}
