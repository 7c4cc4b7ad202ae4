package mutex

import (
	"sync/atomic"

	"github.com/lockgen/lockgen/runtime/internal/lockenv"
)

// Env is the Client's parts (lockenv.Env) with the engine's own state
// per Client: whether the server refused hand-offs, and the streaks of
// grants across processes.
type Env struct {
	*lockenv.Env
	handoffRefused atomic.Bool  // see refuseHandoffs
	grants         grantStreaks // spaces out the releases that publish (grant.go)
}

// NewEnv returns the engine's Env over the Client's parts e.
func NewEnv(e *lockenv.Env) *Env { return &Env{Env: e} }

// refuseHandoffs turns hand-offs off for good: the server refused PUBSUB
// in a script (err).
func (e *Env) refuseHandoffs(err error) {
	if !e.handoffRefused.Swap(true) {
		e.Log.Warn("hand-offs refused by the server; releases publish the unlock message instead", "err", err)
	}
}
