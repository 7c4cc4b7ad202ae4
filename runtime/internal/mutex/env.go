package mutex

import (
	"sync/atomic"

	"github.com/lockgen/lockgen/runtime/internal/holds"
	"github.com/lockgen/lockgen/runtime/internal/lockenv"
)

// Env is the Client's parts with the engine's own state per Client.
type Env struct {
	*lockenv.Env
	handoffRefused atomic.Bool  // see refuseHandoffs
	grants         grantStreaks // spaces out the releases that publish (grant.go)
}

// NewEnv returns the engine's Env over the Client's parts e.
func NewEnv(e *lockenv.Env) *Env { return &Env{Env: e} }

// refuseHandoffs turns hand-offs off for good: the server refused them.
func (e *Env) refuseHandoffs(err error) {
	if !e.handoffRefused.Swap(true) {
		e.Log.Warn("hand-offs refused by the server; releases publish the unlock message instead", "err", err)
	}
}

// The engine's names for the registry's types (package holds).
type (
	hold        = holds.Hold
	holdID      = holds.ID
	lockArgs    = holds.Args
	acquisition = holds.Acquisition
)

// taker is a Lock as the registry sees it (holds.Taker): the handle that
// took a hold, which renews its extra keys and gives back what it lost.
type taker Lock

func (t *taker) ExtraKeys(h *hold) []string {
	return t.kind.extraKeys(h.Key, h.Owner, h.Count())
}

// GiveBackLost marks the owner's outcome unknown, so its next call (an
// Unlock of the lost hold) re-reads the count first, and settles that in
// the background: reconcile gives back what Redis still has of the owner.
// A hold ended at its deadline may have had its renewals reach Redis with
// only their replies lost: Redis then keeps the lock for an owner whose
// ctx is done. The scripts check the owner, so nothing of another owner is
// touched, and a renewal arriving later extends nothing.
func (t *taker) GiveBackLost(h *hold) {
	m := (*Lock)(t)
	m.settleLater(h.Args, nil, m.env.GiveBackFor(), m.env.Reg.MarkLost(h))
}
