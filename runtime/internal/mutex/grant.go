package mutex

import (
	"hash/maphash"
	"sync/atomic"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/hub"
)

// Grants across processes (docs/redisson.md, "Hand-offs"): a reentrant
// lock's last release gives the lock to the longest waiting lockgen waiter
// of any process and wakes that process only, instead of publishing to
// every process with a waiter. The queue and its rule live in Redis
// (grant_next.lua):
//
//   - a waiter's try, once its client is subscribed to the lock's channel
//     together with its grant channel (hub.Sub.Also: one SUBSCRIBE, so one
//     is never subscribed without the other), registers it in the queue
//     with its lease and the try's nonce; its record lives
//     grantRecordLife, and it tries again before that (refreshEvery);
//   - a release grants the head only when every subscriber of the lock's
//     channel is such a client (else a Redisson waiter could be passed
//     over); a client whose grant channel has no subscriber is skipped;
//   - the grant's message names the owner and the nonce; the waiter claims
//     it (claimGrant), and a try of the grantee before that takes the
//     grant as its own (count.lua);
//   - a waiter that gives up leaves the queue and gives back a grant it
//     never took (mutex_leave.lua).
//
// A local hand-off (handoff.go) goes first when only the releasing client
// listens; every grantStreak-th release of a lock publishes instead.

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

// allow reports whether this release of key may grant across processes:
// all but every grantStreak-th.
func (g *grantStreaks) allow(key string) bool {
	return g[maphash.String(grantSeed, key)%64].Add(1)%grantStreak != 0
}

// tryState is what an acquisition's tries told of grants: the nonce of the
// last try that registered for them ("" if not: only a grant carrying it
// is claimed), whether any try queued the waiter in Redis (its release
// then clears its record), and the part of the lease a claimed grant
// confirmed (claimGrant; 0: all of it).
type tryState struct {
	nonce     string
	queued    bool
	confirmed time.Duration
}

// grantNames are a lock's queue keys and this client's grant channel.
type grantNames struct {
	queue, records, hubs, lockCh any
	channel                      string
}
