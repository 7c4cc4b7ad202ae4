package mutex

import (
	"hash/maphash"
	"sync/atomic"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/hub"
)

// Grants across processes (docs/redisson.md, "Hand-offs"): a reentrant
// lock's last release gives the lock to the longest waiting lockgen waiter
// of any process (grant_next.lua) and wakes that process only. A waiter's
// try registers it in the queue with its lease and the try's nonce once
// its client is subscribed to the lock's channel together with its grant
// channel (hub.Sub.Also: one SUBSCRIBE, so never one without the other).
// A release grants only when every subscriber of the lock's channel is
// such a client (else a Redisson waiter could be passed over); the waiter
// claims the grant (claimGrant), or its next try takes it (count.lua). A
// local hand-off goes first; every grantStreak-th release publishes.

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
