package mutex

import (
	"sync/atomic"

	"github.com/lockgen/lockgen/runtime/internal/holds"
	"github.com/lockgen/lockgen/runtime/internal/lockenv"
)

// Env is the Client's parts with the engine's own state per Client.
type Env struct {
	*lockenv.Env
	handoffRefused atomic.Bool  // the server refused hand-offs: releases publish
	grants         grantStreaks // spaces out the releases that publish (grant.go)
}

// NewEnv returns the engine's Env over the Client's parts e.
func NewEnv(e *lockenv.Env) *Env { return &Env{Env: e} }

// The engine's names for the registry's types (package holds).
type (
	hold     = holds.Hold
	holdID   = holds.ID
	lockArgs = holds.Args
)

// taker is a Lock as the registry sees it (holds.Taker): the handle that
// took a hold, which renews its extra keys and gives back what it lost.
type taker Lock

func (t *taker) ExtraKeys(h *hold) []string {
	return t.kind.extraKeys(h.Key, h.Owner, h.Count())
}

// GiveBackLost gives back, in the background (reconcile), what Redis
// still has of a hold ended at its deadline, whose renewals may have
// reached Redis with only their replies lost; the owner's next call
// re-reads its count first. The scripts check the owner: nothing of
// another owner is touched.
func (t *taker) GiveBackLost(h *hold) {
	m := (*Lock)(t)
	m.settleLater(h.Args, nil, m.env.GiveBackFor(), m.env.Reg.MarkLost(h))
}
