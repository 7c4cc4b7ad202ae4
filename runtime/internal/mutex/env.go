package mutex

import (
	"sync/atomic"

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
