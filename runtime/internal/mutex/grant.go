package mutex

import (
	"context"
	"hash/maphash"
	"sync/atomic"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/hub"
	"github.com/lockgen/lockgen/runtime/internal/lockenv"
)

// Grants across processes (docs/redisson.md, "Hand-offs", has the keys
// and the rules): a reentrant lock's last release gives the lock to the
// longest waiting lockgen waiter of any process (grant_next.lua), after a
// local hand-off. A waiter's try registers it in the queue only once its
// client is subscribed to the lock's channel together with its grant
// channel (hub.Sub.Also: one SUBSCRIBE, never one without the other). The
// waiter claims the grant (claimGrant), or its next try takes it.

// grantRecordLife is how long a waiter's registration lives without a
// try: a waiter whose process hangs or is cut off while its connection
// stays open is skipped after that, and a grant made to it is cut to it.
const grantRecordLife = 2 * time.Second

var grantRecordLifeArg any = grantRecordLife.Milliseconds()

const grantStreak = hub.HandoffStreak

// grantStreaks counts, per lock (hashed), the releases that may grant
// since the last one that published.
type grantStreaks [64]atomic.Uint32

var grantSeed = maphash.MakeSeed()

// allow reports whether this release of key may grant: all but every grantStreak-th.
func (g *grantStreaks) allow(key string) bool {
	return g[maphash.String(grantSeed, key)%64].Add(1)%grantStreak != 0
}

// grantNames are a lock's queue keys and this client's grant channel.
type grantNames struct {
	queue, records, hubs, lockCh any
	channel                      string
}

// claimGrant takes the lock a release granted in Redis (a fair lock's or
// one of another process), in the owner's turn (kept when it took it).
// The grant's lease is the waiter's own, counted from its last try, cut to
// the waiter's record. Only a grant made for that try is claimed (a
// delayed message may be of a grant whose lease ran out since); one not
// claimed is taken by the next try, its lease applied anew (count.lua).
func (w *Acquiring) claimGrant(marker string) bool {
	if marker == "" || marker != w.nonce {
		return false
	}
	m, c := w.m, w.m.env
	cut := grantRecordLife
	if !w.handOffs {
		cut = m.opts.QueueTimeout
	}
	id := holdID{Key: m.key, Field: w.a.FieldID()}
	_, px, _ := c.Reg.Enter(context.Background(), id, w.lease) // an owner of its own: the turn is free
	var took bool
	took, w.confirmed = grantClaimable(w.lease == lockenv.Watchdog, px, cut, time.Since(w.sent), c.Reg.Timing().Tick)
	if !took {
		c.Reg.Exit(id)
	}
	return took
}

// grantClaimable is claimGrant's decision for a hold of lease px granted
// with its lease cut to cut, whose last try was sent age ago: whether it
// is claimed, and what of its lease is confirmed (0: all of it).
func grantClaimable(watchdog bool, px, cut, age, tick time.Duration) (took bool, confirmed time.Duration) {
	if cut < px {
		if !watchdog {
			return false, 0
		}
		confirmed = cut
	}
	budget := min(px, cut) / 2
	if confirmed > 0 {
		// Only the cut is confirmed: the first renewal goes out at the
		// watchdog's next tick and must be confirmed before the cut runs
		// out. Without room for that, the next try (at once) takes the
		// grant with the whole lease (count.lua).
		budget -= tick
	}
	if age > budget {
		return false, 0
	}
	return true, confirmed
}
