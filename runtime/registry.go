package runtime

import (
	"hash/maphash"
	"sync"
	"sync/atomic"

	"github.com/lockgen/lockgen/runtime/internal/leaseclock"
	"github.com/lockgen/lockgen/runtime/internal/renew"
)

// The registry is what a Client knows of its holds: the holds by (key,
// field), the turns of calls in flight (gate.go) and the holds whose last
// outcome is unknown (reconcile.go). It is sharded by key, so calls on
// unrelated locks never wait for each other's bookkeeping: every field of a
// hold is guarded by the mutex of its key's shard.
type registry struct {
	seed   maphash.Seed
	shards [registryShards]shard
	closed atomic.Bool
	// unknownN counts the entries of every shard's unknown set, so the hot
	// path can skip the look-up while there are none.
	unknownN atomic.Int32
	// unknownGen numbers the unknown marks, so a background settlement
	// (reconcile.go) only ever drops its own.
	unknownGen atomic.Uint64
}

// registryShards is a power of two well above the number of cores: two
// busy keys rarely share a shard.
const registryShards = 512

type shard struct {
	mu      sync.Mutex
	holds   map[holdID]*hold
	turns   map[holdID]turn   // calls in flight, one per owner and lock
	unknown map[holdID]uint64 // the mark's generation
	// The watchdog's wheel for the holds of this shard (watchdog.go).
	wheel renew.Wheel[*hold]
	// The lease clock's queue of this shard's holds (lease.go).
	due leaseclock.Queue[*hold]
}

func (r *registry) init() {
	r.seed = maphash.MakeSeed()
	for i := range r.shards {
		s := &r.shards[i]
		s.holds = make(map[holdID]*hold)
		s.turns = make(map[holdID]turn)
		s.unknown = make(map[holdID]uint64)
		s.due.Init()
	}
}

// shard is the shard of key.
func (r *registry) shard(key string) *shard {
	return &r.shards[maphash.String(r.seed, key)%registryShards]
}

// each calls f for every hold, with its shard's mutex held.
func (r *registry) each(f func(h *hold)) {
	for i := range r.shards {
		s := &r.shards[i]
		s.mu.Lock()
		for _, h := range s.holds {
			f(h)
		}
		s.mu.Unlock()
	}
}
