package runtime

import (
	"context"
	"hash/maphash"
	"strings"
	"sync/atomic"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/scripts"
)

// Grants across processes: a reentrant lock's last release gives the lock
// to the longest waiting lockgen waiter of any process, and wakes that
// process only, instead of publishing Redisson's unlock message to every
// process with a waiter (which all wake one that tries; one wins). The
// queue and the rule live in Redis (lua/grant_next.lua):
//
//   - a waiter's try, once its client is subscribed to the lock's channel
//     together with its own grant channel (grantChannel; channelEntry.also: one
//     SUBSCRIBE, so one is never subscribed without the other), registers
//     it in lockgen_lock_queue:{lock} with its lease and the try's nonce;
//     its place is kept from its first try, its record lives
//     grantRecordLife, and it tries again before that (maxSleep);
//   - a last release grants the lock to the head only when every
//     subscriber of the lock's channel is such a client (else a Redisson
//     waiter could be passed over: then it publishes "0"); a client whose
//     grant channel has no subscriber is gone and its waiters are skipped;
//   - the grant's message on the grantee's client channel names the owner
//     and the nonce (deliverGrant); the waiter claims it like a fair
//     lock's grant (claimGrant), and a try of the grantee before that
//     takes the grant as its own (count.lua);
//   - a waiter that gives up leaves the queue, and gives back a grant it
//     never took (lua/mutex_leave.lua).
//
// A local hand-off (handoff.go) still goes first when only the releasing
// client listens. Every grantStreak grants in a row for a lock, a client
// publishes instead, for listeners Redis does not count (see handOffStreak).

// grantRecordLife is how long a waiter's registration lives without a
// try: a waiter whose process hangs or is cut off while its connection
// stays open is skipped after that, and a grant made to it meanwhile is
// cut to it.
const grantRecordLife = 2 * time.Second

// grantRecordLifeArg is grantRecordLife as a script argument.
var grantRecordLifeArg any = grantRecordLife.Milliseconds()

// grantStreak: see above.
const grantStreak = handOffStreak

func grantQueue(key string) string   { return prefixName("lockgen_lock_queue", key) }
func grantRecords(key string) string { return prefixName("lockgen_lock_grants", key) }
func grantHubs(key string) string    { return prefixName("lockgen_lock_hubs", key) }

// grantChannel is this client's grant channel for key: the lock's channel
// and the client's id, under Redisson's prefix so that an ACL granting
// Redisson's channels (&redisson_*) grants it too. It cannot be a Redisson
// fair waiter's (lock channel:<client id>:<thread id>), nor one of
// lockgen's (lock channel:<owner>).
func (c *Client) grantChannel(key string) string { return lockChannel(key) + ":" + c.id }

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

// grantEntry reports whether channel's subscription is confirmed together
// with a grant channel: a try may register for grants.
func (h *hub) grantEntry(channel string) bool {
	sh := h.shard(channel)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.entries[channel]
	return e != nil && e.also != "" && e.ready()
}

// known reports whether this client waits, or waited moments ago, on
// channel: its release then looks for a waiter to grant the lock to.
func (h *hub) known(channel string) bool {
	if !h.active() {
		return false
	}
	sh := h.shard(channel)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.entries[channel] != nil
}

// markRemote records that other processes wait on channel's lock; with
// held (the lock was granted to one of them) see markRemoteLocked.
func (h *hub) markRemote(channel string, held bool) {
	sh := h.shard(channel)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e := sh.entries[channel]; e != nil {
		markRemoteLocked(e, held)
	}
}

// markRemoteLocked sets e.remote. With held (a grant holds the lock, so a
// try cannot overtake anyone), waiters that slept without a try (behind
// this client's own, see await) try now, so the queue in Redis has them;
// otherwise they do on their next wake-up or maxSleep. e.sh.mu is held.
func markRemoteLocked(e *channelEntry, held bool) {
	if e.remote && !held {
		return
	}
	e.remote = true
	if !held {
		return
	}
	for _, w := range e.waiters {
		if w.untried {
			signal(e, w)
		}
	}
}

// deliverGrant handles a message on a grant channel: "2:<owner> <nonce>",
// a release gave the lock to owner for its try with nonce. The waiter is
// woken to claim it; if it is gone or busy, its next try takes the grant
// (or its leave gives it back).
func (h *hub) deliverGrant(channel, payload string) {
	h.aliasMu.RLock()
	e := h.aliases[channel]
	h.aliasMu.RUnlock()
	if e == nil {
		return
	}
	rest, ok := strings.CutPrefix(payload, grantPrefix)
	owner, nonce, ok2 := strings.Cut(rest, " ")
	if !ok || !ok2 {
		return
	}
	sh := e.sh
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.entries[e.name] != e {
		return
	}
	markRemoteLocked(e, true)
	for _, w := range e.waiters {
		if w.grantField == owner {
			if w.offer == offerNone {
				w.offer, w.offerMarker = offerRemote, nonce
				signal(e, w)
			}
			return
		}
	}
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
		channel: m.c.grantChannel(m.key),
	}
	m.names.Store(n)
	return n
}

// markQueued records that w's waiter was queued in Redis by a try: a
// release that hands it the lock clears its record there.
func (h *hub) markQueued(w *waiter) {
	sh := w.e.sh
	sh.mu.Lock()
	w.queued = true
	sh.mu.Unlock()
}

// queueTry says whether a try of m registers its waiter for grants, and
// with which lease argument ("0": it takes none, but is in line).
func (m *Mutex) queueTry(ctx context.Context, a lockArgs, px time.Duration, waiting bool, count int) (bool, any) {
	c := m.c
	if !waiting || count != 0 || !m.handsOff() || !c.hub.active() || !c.hub.grantEntry(lockChannel(m.key)) {
		return false, nil
	}
	if c.holdOf(ctx) != nil || c.isUnknown(holdID{m.key, a.fieldID()}) {
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
		3: a.key, n.lockCh, n.queue, n.records, n.hubs,
		a.owner, c.publish, m.untakenGrant(ctx, a), n.lockCh,
	}).Int64()
}

// untakenGrant is the leave scripts' "may a hold be a grant never taken"
// argument: "1" only for an owner of its own holding nothing of the lock
// here, since then a hold in Redis can only be a grant.
func (m *Mutex) untakenGrant(ctx context.Context, a lockArgs) string {
	c := m.c
	if c.holdOf(ctx) == nil {
		if n, _ := c.holdState(m.key, a.fieldID(), 0); n == 0 {
			return "1"
		}
	}
	return "0"
}
