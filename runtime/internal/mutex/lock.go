package mutex

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime/internal/await"
	"github.com/lockgen/lockgen/runtime/internal/calls"
	"github.com/lockgen/lockgen/runtime/internal/errs"
	"github.com/lockgen/lockgen/runtime/internal/holds"
	"github.com/lockgen/lockgen/runtime/internal/hub"
	"github.com/lockgen/lockgen/runtime/internal/lockenv"
	"github.com/lockgen/lockgen/runtime/internal/scripts"
	"github.com/lockgen/lockgen/runtime/internal/settle"
)

// Options are the lock's settings the engine reads (of runtime.LockOptions).
type Options struct {
	Name         string
	QueueTimeout time.Duration // Fair: a queued waiter's silence before it is skipped
	WritersFirst bool          // Read, Write: a waiting writer holds new readers back
	SyncReplicas int           // replicas that must acknowledge an acquisition
	Fenced       bool          // Reentrant: every acquisition increments a token (FencedLock)
}

// A Lock is the engine of one lock handle: one key of one Kind. It is safe for concurrent use.
type Lock struct {
	env   *Env
	key   string
	kind  Kind
	opts  Options
	names atomic.Pointer[grantNames] // made on first use
}

// Init makes m the lock of kind at key, in env.
func (m *Lock) Init(env *Env, key string, kind Kind, o Options) {
	m.env, m.key, m.kind, m.opts = env, key, kind, o
}

// Key is the Redis key of the lock.
func (m *Lock) Key() string { return m.key }

// KindName is the lock's kind as events name it.
func (m *Lock) KindName() string { return kindNames[m.kind] }

// Same reports whether o is a handle of the lock m is: the same key, kind
// and fencing.
func (m *Lock) Same(o *Lock) bool { return m.key == o.key && m.Describe() == o.Describe() }

// Describe names the lock's kind for an error: "a fair lock", "a fenced lock"...
func (m *Lock) Describe() string {
	if m.opts.Fenced {
		return "a fenced lock"
	}
	return describe[m.kind]
}

// Batchable reports whether multi_acquire.lua can take the lock: a
// reentrant lock without replica sync or a fencing token.
func (m *Lock) Batchable() bool {
	return m.kind == Reentrant && m.opts.SyncReplicas == 0 && !m.opts.Fenced
}

// WaitChannel is the channel a waiter of owner sleeps on.
func (m *Lock) WaitChannel(owner string) string { return m.kind.channel(m.key, owner) }

func (m *Lock) fail(op string, err error) error { return m.env.Fail(op, m.opts.Name, m.key, err) }

// Owner is the owner an acquisition with ctx takes the lock as: that of
// the hold ctx carries (a re-entry; checkReentry refuses what it cannot
// be), or a new one.
func (m *Lock) Owner(ctx context.Context) (string, error) {
	hc := m.env.Reg.Of(ctx)
	if hc == nil {
		return m.env.NewOwner(), nil
	}
	return hc.Owner(), m.checkReentry(hc.Owner())
}

// checkReentry refuses, before any round trip, an acquisition by an owner
// that holds m's key through another lock. A hold is of one lock (its
// key, kind and fencing: Same), and only that lock's scripts count it:
// another kind's on the same field would mix the counts (a read hold has
// a timeout key per count, a fair lock wakes its queue on channels of its
// own, a reentrant one grants to a queue of its own), and a lock that the
// owner's own hold shuts out would wait on itself. Redisson lets an RLock
// re-enter an RFairLock's hold of the same name; here that is refused
// too (errs.InvalidArgument). The one pair allowed is a read-write
// lock's: a writer takes read holds (a downgrade) and re-enters its write
// hold under them, as in Redisson; a reader without the write side asking
// for it would wait on itself (errs.Upgrade). The registry is the truth,
// not the ctx chain: a hold in the chain may be released.
func (m *Lock) checkReentry(owner string) error {
	own := m.env.Reg.Hold(holdID{Key: m.key, Field: owner})
	write := m.env.Reg.Hold(holdID{Key: m.key, Field: writeField(owner)})
	switch o := lockOf(own); {
	case own == nil:
	case o != nil && o.kind == Read && m.kind == Write:
		if write == nil {
			return fmt.Errorf("%w: the owner holds a read hold of this lock and not its write side", errs.Upgrade)
		}
	case !m.took(own):
		return m.another(own)
	}
	if write != nil && m.kind != Read && m.kind != Write {
		return m.another(write)
	}
	return nil
}

// another is the refusal of an acquisition of m by the owner of h, a hold
// of m's key through another lock.
func (m *Lock) another(h *holds.Hold) error {
	return fmt.Errorf("%w: ctx holds this key as %s, which %s on the same key cannot re-enter", errs.InvalidArgument, describeHold(h), m.Describe())
}

// lockOf is the lock whose handle took h, nil for another engine's hold.
func lockOf(h *holds.Hold) *Lock {
	if h == nil {
		return nil
	}
	t, _ := h.From.(*taker)
	return (*Lock)(t)
}

// took reports whether h is a hold of m: taken through a handle of m's
// lock (Same), not another kind's on its key and field.
func (m *Lock) took(h *holds.Hold) bool {
	o := lockOf(h)
	return o != nil && m.Same(o)
}

// describeHold names the lock h is a hold of, as Describe does.
func describeHold(h *holds.Hold) string {
	if o := lockOf(h); o != nil {
		return o.Describe()
	}
	return "a " + h.Kind
}

// Acquire waits up to wait (0: one try; < 0: until ctx is done) for the
// lock as owner, in a call that must return by until (zero: no bound but
// wait's). A taken lock keeps the owner's turn until Record; a waiter
// that gives up withdraws what it left in Redis.
func (m *Lock) Acquire(ctx context.Context, owner string, wait, lease time.Duration, until time.Time) (*Acquiring, error) {
	m.env.Acquiring.Add(1)
	defer m.env.Acquiring.Add(-1)
	w := &Acquiring{m: m, ctx: ctx, a: holds.NewArgs(m.key, owner, m.kind.field(owner)), lease: lease, start: time.Now(), waiting: wait != 0}
	if err := m.env.Waits.Await(ctx, m.waitSpec(w, wait, until), w.try); err != nil {
		if w.waiting {
			m.leave(ctx, w.a)
		}
		return nil, m.fail("acquire", err)
	}
	return w, nil
}

// waitSpec is how w waits (package await).
func (m *Lock) waitSpec(w *Acquiring, wait time.Duration, until time.Time) await.Spec {
	own := m.env.Reg.Of(w.ctx) == nil
	// Only a reentrant newcomer queues behind this Client's waiters: Redis
	// orders fair waiters, and readers and writers share a channel.
	ws := await.Spec{At: w, Wait: wait, Until: until, MaxSleep: m.kind.refreshEvery(m), Shared: m.kind == Read, Queue: m.kind == Reentrant && own}
	switch {
	case !w.waiting:
	case m.handsOff() && own:
		// Only an owner of its own is handed a lock: the hand-off acquires
		// outside the owner's turn, so a call of another goroutine sharing
		// the owner would count it as its own.
		ws.Handed, ws.Grants, w.handOffs = w, w, true
	case m.handsOff():
		ws.Grants = w // queued for grants from other processes
	case m.takesGrants() && own:
		ws.Handed = w // a fair lock's release may grant it the lock
	}
	return ws
}

func (m *Lock) spec() holds.Spec {
	return holds.Spec{Name: m.opts.Name, Key: m.key, Kind: kindNames[m.kind], From: (*taker)(m), Extra: m.kind == Read}
}

// try runs the kind's acquire script once, in the owner's turn (kept when
// it took the lock). A lost reply is settled: it took the lock, or is
// marked aborted so it never will; one abandoned at its deadline is
// resolved when its reply comes (resolveLate).
func (w *Acquiring) try(ctx context.Context) (took bool, _ time.Duration, err error) {
	m, c, a := w.m, w.m.env, w.a
	w.sent = time.Now()
	id := holdID{Key: m.key, Field: a.FieldID()}
	count, px, err := c.Reg.Enter(ctx, id, w.lease)
	if err != nil {
		return false, 0, err
	}
	defer func() {
		if !took {
			c.Reg.Exit(id)
			if w.waiting && err == nil {
				w.WaitStarted()
			}
		}
	}()
	if err := m.reconcile(ctx, c.RDB, a); err != nil {
		return false, 0, err
	}
	at := attempt{via: c.RDB, px: c.LeaseArg(px), marker: lockenv.RequestMarker(m.key, c.NewRequestID()), count: count, waiting: w.waiting, fence: &w.fence}
	// A fair waiter may be granted the lock once its channel's
	// subscription is confirmed: the grant's message cannot miss it.
	at.grant = w.waiting && count == 0 && m.takesGrants() && c.Reg.Of(ctx) == nil &&
		c.Hub.Subscribed(m.kind.channel(m.key, a.OwnerID()), false)
	at.queued, at.grantPx = m.queueTry(ctx, a, px, w.waiting, count)
	w.nonce = ""
	if at.grant || (at.queued && at.grantPx != "0") {
		w.nonce = at.marker
	}
	w.queued = w.queued || at.queued
	var n int64
	if m.opts.SyncReplicas > 0 {
		n, err = m.acquireReplicated(ctx, a, at)
	} else {
		n, err = m.kind.acquire(ctx, m, a, at)
	}
	switch {
	case err == nil:
		return replied(n)
	case scripts.IsReply(err), errors.Is(err, errs.NotReplicated), scripts.NotSent(err):
		return false, 0, err
	}
	if p := scripts.Abandoned(err); p != nil {
		m.resolveLate(ctx, p, a, at, px)
		return false, 0, fmt.Errorf("%w: %w", errs.OutcomeUnknown, err)
	}
	settled, serr := m.settleLost(ctx, a, at, px)
	switch {
	case serr != nil:
		return false, 0, serr
	case !settled:
		return false, 0, err
	case m.opts.SyncReplicas > 0:
		// Taken, but whether the replicas have it is unknown: undo it.
		m.undo(ctx, a, at)
		return false, 0, fmt.Errorf("%w: the acquire's reply was lost, so its replication is unknown: %w", errs.NotReplicated, err)
	case m.opts.Fenced:
		// The lost token is the counter as it stands: no one else can
		// increment it while this owner holds the lock.
		if err := m.readFence(ctx, &w.fence); err != nil {
			c.MarkUnknown(id, err)
			return false, 0, err
		}
	}
	return true, 0, nil
}

// replied is what an acquire script's reply n says: taken, a sleep bound, or a refusal.
func replied(n int64) (bool, time.Duration, error) {
	switch n {
	case 0:
		return true, 0, nil
	case replyUpgrade:
		return false, 0, fmt.Errorf("%w: the owner holds a read hold", errs.Upgrade)
	case replyWriterFirst:
		return false, await.TTLWaiterFirst, nil
	case replyAborted: // only a copy of a request already settled gets this
		return false, 0, fmt.Errorf("%w: the attempt was settled as aborted", errs.NotAcquired)
	case replyHoldGone:
		return false, 0, fmt.Errorf("%w: the hold this re-entry counts on is gone (its lease ran out or the key was deleted)", errs.LockLost)
	}
	return false, time.Duration(n) * time.Millisecond, nil
}

// settleLost settles an acquire attempt at whose reply was lost, in the
// owner's turn. If that is lost too, the outcome is marked unknown, and
// a fresh owner's (at.count 0) is settled in the background.
func (m *Lock) settleLost(ctx context.Context, a lockArgs, at attempt, px time.Duration) (bool, error) {
	settled, err := m.settleTry(ctx, a, at)
	if err == nil && settled && at.count == 0 && m.handsOff() {
		// The field may be another process's grant, cut to the waiter's record.
		settled, err = m.reapply(ctx, a, at)
	}
	if err != nil {
		if gen := m.env.MarkUnknown(holdID{Key: m.key, Field: a.FieldID()}, err); gen != 0 && at.count == 0 {
			m.settleLater(a, &at, px, gen)
		}
	}
	return settled, err
}

// Reply codes of the acquire scripts besides 0 (taken) and a TTL.
const (
	replyAborted     = -3 // the request was settled as aborted
	replyUpgrade     = -4 // write refused: the owner holds a read hold
	replyWriterFirst = -5 // read not taken: a waiting writer goes first
	replyHoldGone    = -6 // re-entry refused: the owner's hold is gone
)

// leave withdraws a waiter that gave up, within leaveWithin: the caller's
// wait is over. If Redis does not answer by then, or refuses for a state
// that passes (scripts.Refused), the settler goes on until the entry
// would have timed out anyway.
func (m *Lock) leave(ctx context.Context, a lockArgs) {
	if !m.kind.waits(m) {
		return
	}
	c, untaken := m.env, m.untakenGrant(ctx, a) // decided by the caller's ctx, also for the settler
	op := func(ctx context.Context) (int64, error) { return m.kind.leave(ctx, m, a, untaken) }
	done := func(err error) bool { return err == nil || scripts.IsReply(err) && !scripts.Refused(err) }
	if _, err := c.Calls.Retry(scripts.WithCallBound(ctx, time.Now().Add(leaveWithin)), op); done(err) {
		return
	}
	c.Settler.Add(settle.Job{
		Try: func(ctx context.Context) bool {
			_, err := op(ctx)
			return done(err)
		},
		Until: time.Now().Add(max(m.opts.QueueTimeout, c.GiveBackFor())),
		Quit: func() {
			c.Warn("leaving the wait queue failed: Redis did not answer", "lock", m.opts.Name, "key", m.key)
		},
	})
}

const leaveWithin = 15 * time.Millisecond

// Release releases the acquisition that ctx carries, detached from ctx's
// cancellation (within ReleaseTimeout), and returns its owner and start:
// with an error too when the hold ended here (the release failed, or found
// the hold gone in Redis: errs.LockLost), not when it had ended before
// (lost, released: owner "").
func (m *Lock) Release(ctx context.Context) (owner string, start time.Time, _ error) {
	acq, err := m.held(m.env.Reg.Of(ctx))
	if err == nil && acq.Group != nil {
		// An atomic multi-lock's acquisition of the member (not the
		// member's own re-entry inside it): its release gives back every
		// member at once, and a member's alone would end the multi-lock's
		// hold with the other members still taken.
		err = fmt.Errorf("%w: ctx holds this key as a member of the multi-lock %s: release it with the multi-lock", errs.NotHeld, acq.Group.Keys)
	}
	if err != nil {
		return "", time.Time{}, m.fail("release", err)
	}
	h := acq.Hold()
	if h.Lost() {
		return "", time.Time{}, m.fail("release", m.env.DropLost(acq))
	}
	id := holdID{Key: h.Key, Field: h.Field}
	_, _, _ = m.env.Reg.Enter(context.Background(), id, 0) // never fails: no deadline
	defer m.env.Reg.Exit(id)
	rel := acq.Parent // the release's ctx
	if m.env.Reg.Unknown(id) {
		// The re-read shares the release's ReleaseTimeout, whatever Redis does.
		rel = scripts.WithCallBound(rel, m.env.Calls.Limit(rel))
		rctx, cancel := m.env.Calls.Detached(rel)
		m.env.Reg.WaitLate(rctx, id)
		_ = m.reconcile(rctx, m.env.RDB, h.Args) // on failure the release below is refused or resent
		cancel()
	}
	d, ok := m.env.Reg.Drop(acq)
	if !ok {
		return "", time.Time{}, m.fail("release", fmt.Errorf("%w: already released", errs.NotHeld))
	}
	// Before the release reaches Redis and anyone else may take the lock.
	acq.End(context.Canceled)
	var offer hub.Offer
	defer func() {
		if offer.Made() {
			// The grantee goes on only once this hold's ctx is done.
			m.env.Hub.Settle(offer)
		}
	}()
	if d.Lost != nil {
		return "", time.Time{}, m.fail("release", d.Lost)
	}
	var held bool
	rel = m.env.Calls.Yield(rel, m.key)
	sent := time.Now()
	// A last release may hand the lock on: to a waiter of this client, or
	// one queued in Redis (looked for when the hold came through the
	// queue, even when this client no longer waits). h.Queued is read
	// without a lock: no acquisition can write the hold any more.
	handOff := d.Last && d.Count == 1 && m.handsOff()
	queued := handOff && h.Queued()
	if handOff && (queued || m.env.Hub.Active()) {
		held, offer, err = m.releaseHandingOff(rel, h.Args, queued)
	} else {
		held, err = m.release(rel, m.env.RDB, h.Args, d.Last, d.Lease, d.Count)
	}
	switch {
	case !d.Last && err != nil:
		// Redis may still count the hold the client dropped (no reply, or
		// a refusal such as NOPERM): the owner's next call re-reads it.
		m.env.Reg.MarkUnknown(id)
	case calls.Unfinished(err) && !errors.Is(err, errFreedUnseen):
		m.giveBackUnreleased(h, id)
	}
	if errors.Is(err, errFreedUnseen) && !sent.Before(h.Deadline()) {
		err = nil // the hold's deadline passed before the release: it was lost
	}
	if err == nil && !held {
		err = fmt.Errorf("%w: the lease ran out or the key was deleted before the release", errs.LockLost)
	}
	if err != nil {
		err = m.fail("release", err)
		m.env.Warn("release failed", "lock", m.opts.Name, "key", m.key, "err", err)
	}
	// With an error too: the hold ended here, unseen by the registry,
	// whose loss reports only holds it still has.
	return h.Owner, acq.Start, err
}

// giveBackUnreleased hands the last hold of h, whose release Redis refused
// or did not answer, to the settler, which releases what Redis still has
// of it once Redis answers (settleLater, as for a hold lost at its
// deadline), rather than leave the lock taken until its lease runs out.
// The owner's next call re-reads its count first. The caller has id's turn.
func (m *Lock) giveBackUnreleased(h *hold, id holdID) {
	gen := m.env.Reg.MarkUnknown(id)
	m.settleLater(h.Args, nil, time.Until(h.Deadline())+m.env.GiveBackFor(), gen)
}

// held is the innermost acquisition of m that hc carries. One of m's key
// and field taken through another kind's handle is not m's (checkReentry
// refuses its re-entry): m's release script would count it wrong.
func (m *Lock) held(hc *holds.Context) (*holds.Acquisition, error) {
	var acq *holds.Acquisition
	if hc != nil {
		acq = holds.Find(hc, holdID{Key: m.key, Field: m.kind.field(hc.Owner())})
	}
	switch {
	case acq == nil:
		return nil, fmt.Errorf("%w: ctx carries no acquisition of this lock", errs.NotHeld)
	case !m.took(acq.Hold()):
		return nil, fmt.Errorf("%w: ctx holds this key as %s, not as %s", errs.NotHeld, describeHold(acq.Hold()), m.Describe())
	}
	return acq, nil
}

// Held returns an error wrapping errs.NotHeld when ctx carries no
// acquisition of m: what Release refuses before it releases anything.
func (m *Lock) Held(ctx context.Context) error {
	_, err := m.held(m.env.Reg.Of(ctx))
	return err
}

// release runs the kind's release script through via, resent on transport
// errors (the owner's hold count before it, count, makes that harmless);
// held is false when Redis had no hold of the owner: errFreedUnseen when
// a copy sent before got no reply (it may be the one that released it).
// Refused until its bound, it did not run: errs.Unavailable.
func (m *Lock) release(ctx context.Context, via scripts.Runner, a lockArgs, last bool, lease time.Duration, count int) (held bool, _ error) {
	c := m.env
	if last {
		lease = c.Watchdog // not applied: the last hold deletes the key
	}
	r := attempt{via: via, px: c.LeaseArg(max(lease, lockenv.MinLease)), count: count}
	_, unanswered, err := c.Calls.RetryRelease(ctx, func(ctx context.Context) (int64, error) {
		return m.kind.release(ctx, m, a, r)
	})
	return releasedFrom(err, unanswered)
}

// errFreedUnseen: a release found no hold of the owner after a copy of it
// got no reply. That copy may have released the hold, which was then held
// until the release: an unknown outcome, not a loss.
var errFreedUnseen = fmt.Errorf("%w: the release got no reply and its resend found the hold gone (the first copy may have released it)", errs.OutcomeUnknown)

// releasedFrom reads a release script's error (redis.Nil: no hold of the
// owner), after unanswered attempts or not: see release.
func releasedFrom(err error, unanswered bool) (held bool, _ error) {
	switch {
	case errors.Is(err, redis.Nil) && unanswered:
		return false, errFreedUnseen
	case errors.Is(err, redis.Nil):
		return false, nil
	}
	return true, err
}

// acquireReplicated runs one attempt and WAITs for SyncReplicas replicas
// on the same connection (WAIT counts its own connection's writes); too
// few undo it (errs.NotReplicated): Redisson's checkLockSyncedSlaves,
// without leaving the lock behind. go-redis does not redirect a
// connection's commands: an attempt refused with MOVED is sent once more
// on the node named (redirect), within ctx.
func (m *Lock) acquireReplicated(ctx context.Context, a lockArgs, at attempt) (int64, error) {
	conn, err := stickyConn(ctx, m.env.RDB, m.key)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	at.via = conn
	ttl, err := m.kind.acquire(ctx, m, a, at)
	if to := redirect(ctx, m.env.RDB, err); to != nil {
		defer to.Close()
		conn, at.via = to, to
		ttl, err = m.kind.acquire(ctx, m, a, at)
	}
	if err != nil || ttl != 0 {
		return ttl, err
	}
	want := m.opts.SyncReplicas
	acked, err := conn.Wait(ctx, want, m.env.Replicas).Result()
	if err == nil && acked >= int64(want) {
		return 0, nil
	}
	m.undo(ctx, a, at)
	if err != nil {
		return 0, fmt.Errorf("%w: WAIT %d: %w", errs.NotReplicated, want, err)
	}
	return 0, fmt.Errorf("%w: %d of %d replicas acknowledged within %v", errs.NotReplicated, acked, want, m.env.Replicas)
}

// undo drops the one count of the hold that attempt at took.
func (m *Lock) undo(ctx context.Context, a lockArgs, at attempt) {
	u := attempt{via: at.via, px: at.px, count: at.count + 1}
	if _, err := m.env.Calls.Retry(ctx, func(ctx context.Context) (int64, error) { return m.kind.release(ctx, m, a, u) }); err != nil {
		m.env.Warn("undoing an acquisition failed", "lock", m.opts.Name, "key", m.key, "err", err)
	}
}

// stickyConn returns one connection to the master serving key.
func stickyConn(ctx context.Context, rdb redis.UniversalClient, key string) (*redis.Conn, error) {
	switch rdb := rdb.(type) {
	case *redis.Client:
		return rdb.Conn(), nil
	case *redis.ClusterClient:
		node, err := rdb.MasterForKey(ctx, key)
		if err != nil {
			return nil, err
		}
		return node.Conn(), nil
	}
	return nil, fmt.Errorf("%w: SyncReplicas needs a *redis.Client or *redis.ClusterClient, not %T", errs.InvalidArgument, rdb)
}

// redirect returns a connection to the node that a MOVED reply, err,
// named, or nil for any other err. MOVED says the script did not run
// where it went (the slot moved since rdb read its map): sending it there
// is no resend. The node is looked for in rdb's map, re-read first (at
// once, unlike calls.SlotMaps' reloads): a new master is found even when
// rdb did not know it, and rdb's next calls go there too. An ASK is not
// followed: on the node importing the slot every acquire script meets
// TRYAGAIN (its request marker is never there), as go-redis' redirect of
// a lock without SyncReplicas does; either refusal is retried by a waiter.
func redirect(ctx context.Context, rdb redis.UniversalClient, err error) *redis.Conn {
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok || err == nil {
		return nil
	}
	addr, moved := redis.IsMovedError(err)
	if !moved {
		return nil
	}
	var node atomic.Pointer[redis.Client]
	_ = cc.ForEachShard(ctx, func(_ context.Context, c *redis.Client) error {
		if c.Options().Addr == addr {
			node.Store(c)
		}
		return nil
	})
	if n := node.Load(); n != nil {
		return n.Conn()
	}
	return nil
}

// IsLocked reports whether anyone holds the lock (for a read-write lock: either side).
func (m *Lock) IsLocked(ctx context.Context) (bool, error) {
	n, err := m.inspect(ctx, "exists", m.key)
	return n == 1, err
}

// HoldCount is the number of holds on the lock of the owner ctx carries (0 without one).
func (m *Lock) HoldCount(ctx context.Context) (int, error) {
	hc := m.env.Reg.Of(ctx)
	if hc == nil {
		return 0, nil
	}
	n, err := m.inspect(ctx, "hget", m.key, m.kind.field(hc.Owner()))
	return int(n), err
}

// RemainTTL is the time until the lock's lease runs out: 0 when the lock
// is free, -1 when the key has no expiry.
func (m *Lock) RemainTTL(ctx context.Context) (time.Duration, error) {
	ms, err := m.inspect(ctx, "pttl", m.key)
	switch {
	case err != nil || ms == -2: // no key
		return 0, err
	case ms < 0: // no expiry
		return -1, nil
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// inspect runs a read command: a nil reply is 0.
func (m *Lock) inspect(ctx context.Context, args ...any) (int64, error) {
	n, err := scripts.Do(ctx, m.env.RDB, args...).Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, m.fail("inspect", err)
	}
	return n, nil
}

// ForceUnlock ends the local holds of the key as lost, then deletes the
// lock whoever holds it, wakes the waiters that can go next, and reports
// whether there was a lock. The local holds end first, whatever Redis
// answers: the deadline invariant (a waiter woken by the delete takes the
// lock while a hold's ctx still runs otherwise). A hold taken while the
// force was on its way ends after it, and is given back (the force may
// have run before it); so are the first ones when Redis refused the force
// or its reply was lost (the lock may still be there, renewed by no one).
// It is sent once (a resent copy would find no lock): a lost reply is
// errs.OutcomeUnknown.
func (m *Lock) ForceUnlock(ctx context.Context) (bool, error) {
	cause := m.fail("force-unlock", fmt.Errorf("%w: force-unlocked", errs.LockLost))
	first := m.env.Reg.LoseKey(m.key, cause)
	n, err := m.kind.forceUnlock(ctx, m)
	back := m.env.Reg.LoseKey(m.key, cause)
	if err != nil {
		back = append(back, first...)
	}
	m.env.Reg.GiveBack(back)
	if err != nil {
		return false, m.fail("force-unlock", err)
	}
	return n == 1, nil
}

// Token is a fenced lock's token counter: the latest acquisition's token (0 before the first).
func (m *Lock) Token(ctx context.Context) (int64, error) {
	return m.inspect(ctx, "get", tokenKey(m.key))
}
