package mutex

import (
	"hash/maphash"
	"sync/atomic"
	"time"

	"github.com/lockgen/lockgen/internal/redisnames"
	"github.com/lockgen/lockgen/runtime/internal/hub"
)

// Grants across processes: a reentrant lock's last release gives the lock
// to the longest waiting lockgen waiter of any process, and wakes that
// process only, instead of publishing Redisson's unlock message to every
// process with a waiter (which all wake one that tries; one wins). The
// queue and the rule live in Redis (lua/grant_next.lua):
//
//   - a waiter's try, once its client is subscribed to the lock's channel
//     together with its own grant channel (grantChannel; hub.Sub.Also: one
//     SUBSCRIBE, so one is never subscribed without the other), registers
//     it in lockgen_lock_queue:{lock} with its lease and the try's nonce;
//     its place is kept from its first try, its record lives
//     grantRecordLife, and it tries again before that (maxSleep);
//   - a last release grants the lock to the head only when every
//     subscriber of the lock's channel is such a client (else a Redisson
//     waiter could be passed over: then it publishes "0"); a client whose
//     grant channel has no subscriber is gone and its waiters are skipped;
//   - the grant's message on the grantee's client channel names the owner
//     and the nonce (the hub wakes its waiter); the waiter claims it like a fair
//     lock's grant (claimGrant), and a try of the grantee before that
//     takes the grant as its own (count.lua);
//   - a waiter that gives up leaves the queue, and gives back a grant it
//     never took (lua/mutex_leave.lua).
//
// A local hand-off (handoff.go) still goes first when only the releasing
// client listens. Every grantStreak grants in a row for a lock, a client
// publishes instead, for listeners Redis does not count (see hub.HandoffStreak).

// grantRecordLife is how long a waiter's registration lives without a
// try: a waiter whose process hangs or is cut off while its connection
// stays open is skipped after that, and a grant made to it meanwhile is
// cut to it.
const grantRecordLife = 2 * time.Second

// grantRecordLifeArg is grantRecordLife as a script argument.
var grantRecordLifeArg any = grantRecordLife.Milliseconds()

// grantStreak: see above.
const grantStreak = hub.HandoffStreak

func grantQueue(key string) string   { return redisnames.Prefix("lockgen_lock_queue", key) }
func grantRecords(key string) string { return redisnames.Prefix("lockgen_lock_grants", key) }
func grantHubs(key string) string    { return redisnames.Prefix("lockgen_lock_hubs", key) }

// grantChannel is this client's grant channel for key: the lock's channel
// and the client's id, under Redisson's prefix so that an ACL granting
// Redisson's channels (&redisson_*) grants it too. It cannot be a Redisson
// fair waiter's (lock channel:<client id>:<thread id>), nor one of
// lockgen's (lock channel:<owner>).
func grantChannel(key, clientID string) string { return LockChannel(key) + ":" + clientID }

// grantStreaks counts, per lock (hashed), the releases that may grant
// since the last one that published.
type grantStreaks [64]atomic.Uint32

var grantSeed = maphash.MakeSeed()

// allow reports whether this release of key may grant across processes:
// all but every grantStreak-th.
func (g *grantStreaks) allow(key string) bool {
	return g[maphash.String(grantSeed, key)%64].Add(1)%grantStreak != 0
}

// tryState is what an acquisition's tries told of grants (see Lock.Acquire):
// the nonce of the last try that registered for grants, whether any try
// queued the waiter in Redis, and the part of the lease a claimed grant
// confirmed when shorter than the lease (claimGrant; 0: all of it).
type tryState struct {
	nonce     string
	queued    bool
	confirmed time.Duration
}

// grantNames are a lock's queue keys and this client's grant channel,
// boxed once for the scripts.
type grantNames struct {
	queue, records, hubs, lockCh any
	channel                      string
}
