package runtime

import (
	"context"
	"hash/maphash"
	"sync/atomic"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/hub"
	"github.com/lockgen/lockgen/runtime/internal/scripts"
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

func grantQueue(key string) string   { return prefixName("lockgen_lock_queue", key) }
func grantRecords(key string) string { return prefixName("lockgen_lock_grants", key) }
func grantHubs(key string) string    { return prefixName("lockgen_lock_hubs", key) }

// grantChannel is this client's grant channel for key: the lock's channel
// and the client's id, under Redisson's prefix so that an ACL granting
// Redisson's channels (&redisson_*) grants it too. It cannot be a Redisson
// fair waiter's (lock channel:<client id>:<thread id>), nor one of
// lockgen's (lock channel:<owner>).
func grantChannel(key, clientID string) string { return lockChannel(key) + ":" + clientID }

// grantStreaks counts, per lock (hashed), the releases that may grant
// since the last one that published.
type grantStreaks struct {
	seed maphash.Seed
	n    [64]atomic.Uint32
}

// allow reports whether this release of key may grant across processes:
// all but every grantStreak-th.
func (g *grantStreaks) allow(key string) bool {
	return g.n[maphash.String(g.seed, key)%64].Add(1)%grantStreak != 0
}

// tryState is what an acquisition's tries told of grants (see acquireAs):
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

// grantNames returns m's, made on first use (concurrent first uses make
// equal values; one is kept).
func (m *Mutex) grantNames() *grantNames {
	if n := m.names.Load(); n != nil {
		return n
	}
	n := &grantNames{
		queue:   grantQueue(m.key),
		records: grantRecords(m.key),
		hubs:    grantHubs(m.key),
		lockCh:  lockChannel(m.key),
		channel: grantChannel(m.key, m.c.id),
	}
	m.names.Store(n)
	return n
}

// queueTry says whether a try of m registers its waiter for grants, and
// with which lease argument ("0": it takes none, but is in line).
func (m *Mutex) queueTry(ctx context.Context, a lockArgs, px time.Duration, waiting bool, count int) (bool, any) {
	c := m.c
	if !waiting || count != 0 || !m.handsOff() || !c.hub.Subscribed(lockChannel(m.key), true) {
		return false, nil
	}
	if c.reg.Of(ctx) != nil || c.reg.Unknown(holdID{Key: m.key, Field: a.FieldID()}) {
		return true, "0"
	}
	return true, c.leaseArg(px)
}

// grantLeave takes a reentrant waiter that gave up out of the queue, and
// gives back a grant it never took (see fair.leave).
func (m *Mutex) grantLeave(ctx context.Context, a lockArgs) (int64, error) {
	c := m.c
	n := m.grantNames()
	return scripts.MutexLeave.Run(ctx, c.rdb, 5, []any{
		3: a.Key, n.lockCh, n.queue, n.records, n.hubs,
		a.Owner, c.publish, m.untakenGrant(ctx, a), n.lockCh,
	}).Int64()
}

// untakenGrant is the leave scripts' "may a hold be a grant never taken"
// argument: "1" only for an owner of its own holding nothing of the lock
// here, since then a hold in Redis can only be a grant.
func (m *Mutex) untakenGrant(ctx context.Context, a lockArgs) string {
	c := m.c
	if c.reg.Of(ctx) == nil {
		if n, _ := c.reg.State(holdID{Key: m.key, Field: a.FieldID()}, 0); n == 0 {
			return "1"
		}
	}
	return "0"
}
