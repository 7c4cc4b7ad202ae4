package mutex

import (
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

// taker is a Lock as the registry sees it (holds.Taker): the handle that
// took a hold, which renews its extra keys and gives back what it lost.
type taker Lock

func (t *taker) ExtraKeys(h *hold) []string {
	return t.kind.extraKeys(h.Key, h.Owner, h.Count())
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
