package runtime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime/internal/await"
	"github.com/lockgen/lockgen/runtime/internal/holds"
	"github.com/lockgen/lockgen/runtime/internal/hub"
	"github.com/lockgen/lockgen/runtime/internal/scripts"
	"github.com/lockgen/lockgen/runtime/internal/settle"
)

// Mutex is a handle on one lock: a reentrant lock (Client.Mutex), a fair
// lock (Client.FairLock), or the read or write side of a read-write lock
// (RWLock.Read, RWLock.Write). It plays the part of Redisson's RLock, with
// its layout: a hash at Key whose field names the owner and whose value is
// the hold count.
//
// Ownership is carried by context.Context: Lock, TryLock and Do hand out a
// ctx that carries the owner token, and an acquisition made with that ctx
// (or one derived from it) re-enters the lock. Goroutines that share such
// a ctx share the hold, so hand it only to work that is part of the
// critical section. Unlock takes the ctx its acquisition returned.
//
// The ctx of a hold is cancelled with a cause wrapping ErrLockLost as soon
// as the hold is known to be gone, so work guarded by the lock can stop.
//
// A Mutex is a cheap handle: create one per key as needed. It is safe for
// concurrent use.
type Mutex struct {
	c    *Client
	key  string
	opts LockOptions
	k    kind
	// fenced: every acquisition also increments the lock's token counter
	// in the same script call (see FencedLock).
	fenced bool
	// names holds the names of the lock's queue for grants, made on first
	// use (grant.go).
	names atomic.Pointer[grantNames]
}

// Key is the Redis key of the lock.
func (m *Mutex) Key() string { return m.key }

// Name is the logical name of the lock.
func (m *Mutex) Name() string { return m.opts.Name }

func (m *Mutex) fail(op string, err error) error {
	return &LockError{Op: op, Name: m.opts.Name, Key: m.key, Err: err}
}

// Lock waits until it holds the lock or ctx is done, with the lease of the
// Mutex's options. It returns the ctx of the hold; pass it to Unlock.
func (m *Mutex) Lock(ctx context.Context) (context.Context, error) {
	return m.TryLock(ctx, Forever, m.opts.Lease)
}

// TryLock waits up to wait (0: one try; Forever: until ctx is done) for the
// lock and holds it with lease (Watchdog, or a fixed duration). It returns
// the ctx of the hold, or an error wrapping ErrNotAcquired, the ctx's error,
// ErrClosed, ErrUpgrade or a Redis error.
func (m *Mutex) TryLock(ctx context.Context, wait, lease time.Duration) (context.Context, error) {
	if err := m.validate(lease); err != nil {
		return nil, m.fail("acquire", err)
	}
	c := m.c
	var owner string
	if hc := c.reg.Of(ctx); hc != nil {
		owner = hc.Owner()
		if err := m.k.check(m, hc, owner); err != nil {
			return nil, m.fail("acquire", err)
		}
	} else {
		owner = c.newOwner()
	}
	if ctx.Err() != nil {
		// The cause tells more than "context canceled": for the ctx of a
		// hold that was lost it wraps ErrLockLost.
		return nil, m.fail("acquire", context.Cause(ctx))
	}
	return m.acquireAs(ctx, owner, wait, lease, time.Time{})
}

// acquireAs is TryLock for a given owner token, as part of a call that
// must return by until (zero: no bound but wait's).
func (m *Mutex) acquireAs(ctx context.Context, owner string, wait, lease time.Duration, until time.Time) (context.Context, error) {
	c := m.c
	mw := &mutexWait{m: m, ctx: ctx, a: newLockArgs(m.key, owner, m.k.field(owner)), lease: lease, start: time.Now(), waiting: wait != 0}
	own := c.reg.Of(ctx) == nil
	ws := await.Spec{At: mw, Wait: wait, Until: until, MaxSleep: m.k.refreshEvery(m), Shared: m.k.shared(), Queue: m.k.queues() && own}
	switch {
	case !mw.waiting:
	case m.handsOff() && own:
		// Only an owner of its own (a top-level Lock: no goroutine but
		// this one can act for it) is handed a lock: the hand-off
		// acquires for the owner outside its turn, so a call of another
		// goroutine sharing the owner meanwhile would count the grant as
		// its own (handoff.go).
		ws.Handed, ws.Grants, mw.handOffs = mw, mw, true
	case m.handsOff():
		ws.Grants = mw // queued for grants from other processes (grant.go)
	case m.takesGrants() && own:
		ws.Handed = mw // a fair lock's release may grant it the lock (fair.go)
	}
	if err := c.waits.Await(ctx, ws, mw.try); err != nil {
		if mw.waiting {
			m.leave(ctx, mw.a)
		}
		err = m.fail("acquire", err)
		c.observe(Event{Kind: EventAcquireFailed, Name: m.opts.Name, Key: m.key, Lock: kindName(m.k), Ctx: ctx, Wait: time.Since(mw.start), Err: err})
		return nil, err
	}
	// The successful attempt still has its turn (see tryAcquire): the hold
	// is recorded before the owner's next call on this lock reads its count.
	a := mw.a
	id := holdID{Key: m.key, Field: a.FieldID()}
	spec := m.holdSpec()
	spec.Confirmed, spec.Queued, spec.Fence = mw.ts.confirmed, mw.ts.queued, mw.fence
	hctx, err := addHold(c.reg, ctx, spec, a, lease, mw.sent)
	if err != nil {
		// Closed while acquiring: give the lock back rather than leave it.
		count, _ := c.reg.State(id, lease)
		_, _ = m.release(ctx, a, count == 0, c.opts.WatchdogTimeout, count+1)
		c.reg.Exit(id)
		return nil, m.fail("acquire", err)
	}
	c.reg.Exit(id)
	c.observe(Event{Kind: EventAcquired, Name: m.opts.Name, Key: m.key, Lock: kindName(m.k), Owner: owner, Ctx: ctx, Wait: time.Since(mw.start)})
	return hctx, nil
}

// A mutexWait is one acquisition of a Mutex in progress: what its tries
// told, and what the wait loop asks of it (waitee, handee, queuer).
type mutexWait struct {
	m       *Mutex
	ctx     context.Context
	a       lockArgs
	lease   time.Duration
	start   time.Time
	sent    time.Time // when the last try (or the hand-off that took the lock) was sent
	waiting bool      // it waits if the first try does not take the lock
	// handOffs: a release of this Client may hand it the lock (handoff.go),
	// or one of another process grant it from Redis (grant.go); otherwise
	// only a fair lock's release grants it (fair.go).
	handOffs bool
	// ts is what the tries told of grants: the nonce of the last try if
	// it registered for them ("" if not: only a grant carrying it is
	// claimed, claimGrant), and whether any try queued the waiter in
	// Redis (grant.go: its release then clears its record).
	ts    tryState
	fence int64 // a fenced lock's token, once taken
	// started: EventWaitStarted was reported, by the first try that failed
	// or by a waiter that sleeps without one (package await): once a wait.
	started bool
}

func (w *mutexWait) try(ctx context.Context) (bool, time.Duration, error) {
	w.sent = time.Now()
	var fence *int64
	if w.m.fenced {
		fence = &w.fence
	}
	took, ttl, err := w.m.tryAcquire(ctx, w.a, w.lease, w.waiting, fence, &w.ts)
	if w.waiting && !took && err == nil {
		w.WaitStarted()
	}
	return took, ttl, err
}

func (w *mutexWait) WaitChannel() string { return w.m.k.channel(w.m.key, w.a.OwnerID()) }
func (w *mutexWait) WaitKey() string     { return w.m.key }
func (w *mutexWait) Also() string        { return w.m.grantNames().channel }
func (w *mutexWait) Queued() bool        { return w.ts.queued }

func (w *mutexWait) WaitStarted() {
	if c := w.m.c; !w.started && c.opts.Observer != nil {
		c.observe(Event{Kind: EventWaitStarted, Name: w.m.opts.Name, Key: w.m.key, Lock: kindName(w.m.k), Ctx: w.ctx, Wait: time.Since(w.start)})
	}
	w.started = true
}

func (w *mutexWait) Grantee() (string, any) {
	c, id := w.m.c, holdID{Key: w.m.key, Field: w.a.FieldID()}
	if !w.handOffs {
		return id.Field, nil // a fair lock's: granted in Redis, nothing to pass
	}
	if c.reg.Unknown(id) {
		return "", nil // its next try reconciles first
	}
	_, px := c.reg.State(id, w.lease)
	return id.Field, c.leaseArg(px)
}

func (w *mutexWait) Claim(state hub.OfferState, marker string, at time.Time) (bool, error) {
	m := w.m
	switch {
	case !w.handOffs:
		// A fair lock's release granted it the lock in Redis
		// (fair_next.lua): its channel says so, and the hold's lease runs
		// from its last try, sent before it joined the queue.
		took, cut := m.claimGrant(w.a, w.lease, w.sent, marker != "" && marker == w.ts.nonce, m.opts.QueueTimeout)
		w.ts.confirmed = cut
		return took, nil
	case state == hub.OfferRemote:
		// Granted by a release in Redis (grant.go): the lease runs from
		// the try it was granted for, cut to its record.
		took, cut := m.claimGrant(w.a, w.lease, w.sent, marker != "" && marker == w.ts.nonce, grantRecordLife)
		w.ts.confirmed = cut
		return took, nil
	}
	took, err := m.claimOffer(w.ctx, w.a, w.lease, state, marker)
	if took {
		w.sent = at // the hold's lease runs from the hand-off's send
	}
	return took, err
}

func (m *Mutex) validate(lease time.Duration) error { return validate(m.key, lease) }

// validate checks a lock key and a lease.
func validate(key string, lease time.Duration) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty key", ErrInvalidKey)
	case !wellTagged(key):
		return fmt.Errorf("%w: %q has a '{' that opens no hash tag (a lock's other keys would land in other cluster slots); write a tag like {tenant} or escape the brace", ErrInvalidKey, key)
	case lease < 0:
		return fmt.Errorf("%w: negative lease %v (use Watchdog or a positive duration)", ErrInvalidLease, lease)
	case lease > 0 && lease < minLease:
		return fmt.Errorf("%w: lease %v is shorter than %v", ErrInvalidLease, lease, minLease)
	}
	return nil
}

// tryAcquire runs the kind's acquire script once, in the owner's turn on
// this lock (see turn). A reply lost to a transport error or a cancelled ctx
// is settled: the attempt either took the lock (then it is held) or is
// marked aborted so it never will. When it took the lock, the turn is still
// held on return: the caller records the hold, then exits. For a fenced
// lock, *fence is set to the acquisition's token when it took the lock.
// An attempt abandoned at its deadline (a client that does not honour
// deadlines on reads) resolves its late reply itself (late.go).
func (m *Mutex) tryAcquire(ctx context.Context, a lockArgs, lease time.Duration, waiting bool, fence *int64, ts *tryState) (took bool, _ time.Duration, _ error) {
	c := m.c
	id := holdID{Key: m.key, Field: a.FieldID()}
	count, px, err := c.reg.Enter(ctx, id, lease)
	if err != nil {
		return false, 0, err
	}
	defer func() {
		if !took {
			c.reg.Exit(id)
		}
	}()
	if err := m.reconcile(ctx, a); err != nil {
		return false, 0, err
	}
	at := attempt{via: c.rdb, px: c.leaseArg(px), marker: requestMarker(m.key, c.newRequestID()), count: count, waiting: waiting, fence: fence}
	// A fair waiter of an owner of its own may be granted the lock by a
	// release (see takesGrants), once the grant's message cannot miss it:
	// its channel's subscription is confirmed.
	at.grant = waiting && count == 0 && m.takesGrants() && c.reg.Of(ctx) == nil &&
		c.hub.Subscribed(m.k.channel(m.key, a.OwnerID()), false)
	at.queued, at.grantPx = m.queueTry(ctx, a, px, waiting, count)
	ts.nonce = ""
	if at.grant || (at.queued && at.grantPx != "0") {
		ts.nonce = at.marker
	}
	ts.queued = ts.queued || at.queued
	var ttl int64
	if m.opts.SyncReplicas > 0 {
		ttl, err = m.acquireReplicated(ctx, a, at)
	} else {
		ttl, err = m.k.acquire(ctx, m, a, at)
	}
	switch {
	case err == nil && ttl == 0:
		return true, 0, nil
	case err == nil && ttl == replyUpgrade:
		return false, 0, fmt.Errorf("%w: the owner holds a read hold", ErrUpgrade)
	case err == nil && ttl == replyWriterFirst:
		return false, await.TTLWaiterFirst, nil
	case err == nil && ttl == replyAborted:
		// Only a copy of a request already settled gets this reply; a
		// live attempt never should. Say so rather than sleep on it.
		return false, 0, fmt.Errorf("%w: the attempt was settled as aborted", ErrNotAcquired)
	case err == nil && ttl == replyHoldGone:
		return false, 0, fmt.Errorf("%w: the hold this re-entry counts on is gone (its lease ran out or the key was deleted)", ErrLockLost)
	case err == nil:
		return false, time.Duration(ttl) * time.Millisecond, nil
	case scripts.IsReply(err), errors.Is(err, ErrNotReplicated), scripts.NotSent(err):
		return false, 0, err
	}
	if p := scripts.Abandoned(err); p != nil {
		m.resolveLate(ctx, p, a, at, px)
		return false, 0, fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
	}
	settled, serr := m.settleLost(ctx, a, at, px)
	if serr != nil {
		return false, 0, serr
	}
	if settled && m.opts.SyncReplicas > 0 {
		// Taken, but whether the replicas have it is unknown: undo it.
		m.undo(ctx, a, at)
		return false, 0, fmt.Errorf("%w: the acquire's reply was lost, so its replication is unknown: %w", ErrNotReplicated, err)
	}
	if settled && m.fenced {
		// The token the lost reply carried is the counter as it stands:
		// no one else can acquire, and so increment it, while this owner
		// holds the lock (see fenced_acquire.lua).
		if err := m.readFence(ctx, fence); err != nil {
			markUnknown(c.reg, id, err)
			return false, 0, err
		}
	}
	if settled {
		return true, 0, nil
	}
	return false, 0, err
}

// settleLost settles an acquire attempt at whose reply was lost, in the
// owner's turn. If the settlement is lost too, the outcome is marked
// unknown, and a fresh owner's (at.count 0: nobody will call again with
// it) goes on being settled in the background.
func (m *Mutex) settleLost(ctx context.Context, a lockArgs, at attempt, px time.Duration) (bool, error) {
	settled, err := m.k.settle(ctx, m, a, at)
	if err == nil && settled && at.count == 0 && m.handsOff() {
		// The field may be a grant from another process's release, cut
		// to the waiter's record (grant.go), not this request's lease.
		settled, err = m.reapply(ctx, a, at, m.k.acquire)
	}
	if err != nil {
		if gen := markUnknown(m.c.reg, holdID{Key: m.key, Field: a.FieldID()}, err); gen != 0 && at.count == 0 {
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

// leave withdraws a waiter that gave up from the kind's waiting structures
// (the fair queue, the waiting-writer set), detached from ctx. The caller's
// wait is over: it gets leaveWithin for it, and when Redis does not answer
// by then the settler goes on with it in the background, until the entry
// would have timed out anyway.
func (m *Mutex) leave(ctx context.Context, a lockArgs) {
	if !m.k.waits(m) {
		return
	}
	c := m.c
	op := func(ctx context.Context) (int64, error) { return m.k.leave(ctx, m, a) }
	if _, err := c.calls.Retry(scripts.WithCallBound(ctx, time.Now().Add(leaveWithin)), op); err == nil || scripts.IsReply(err) {
		return
	}
	c.settler.Add(settle.Job{
		Try: func(sctx context.Context) bool {
			// The caller's values: whether its owner is one of its own
			// decides if a hold in Redis may be an untaken grant
			// (untakenGrant); a nested owner may hold it again by now.
			_, err := op(valuesOf{sctx, ctx})
			return err == nil || scripts.IsReply(err)
		},
		Until: time.Now().Add(max(m.opts.QueueTimeout, giveBackFor(c.opts.WatchdogTimeout))),
		Quit: func() {
			c.warn("leaving the wait queue failed: Redis did not answer", "lock", m.opts.Name, "key", m.key)
		},
	})
}

// valuesOf is a ctx (its deadline and cancellation) that looks its values
// up in values first: background work done for a caller that has
// returned, which still speaks for the caller's owner.
type valuesOf struct {
	context.Context
	values context.Context
}

func (v valuesOf) Value(k any) any {
	if x := v.values.Value(k); x != nil {
		return x
	}
	return v.Context.Value(k)
}

// leaveWithin is how long a waiter that gave up spends leaving the queue
// before it returns (see leave): a round trip when Redis answers.
const leaveWithin = 15 * time.Millisecond

// Unlock releases the acquisition that ctx carries. The acquisition's ctx
// is done before the release is sent, since from then on someone else may
// take the lock. It runs detached from ctx's cancellation (with the
// Client's ReleaseTimeout), so it releases even when ctx is done. It
// returns an error wrapping ErrNotHeld when ctx holds
// no acquisition of this lock (or it was already released), and one
// wrapping ErrLockLost when the hold was lost before the release.
func (m *Mutex) Unlock(ctx context.Context) error {
	var acq *acquisition
	if hc := m.c.reg.Of(ctx); hc != nil {
		acq = holds.Find(hc, holdID{Key: m.key, Field: m.k.field(hc.Owner())})
	}
	if acq == nil {
		return m.fail("release", fmt.Errorf("%w: ctx carries no acquisition of this lock", ErrNotHeld))
	}
	if acq.Hold().Lost() {
		return m.fail("release", dropLost(m.c.reg, acq))
	}
	h := acq.Hold()
	id := holdID{Key: h.Key, Field: h.Field}
	_, _, _ = m.c.reg.Enter(context.Background(), id, 0) // never fails: no deadline
	defer m.c.reg.Exit(id)
	rel := acq.Parent // the release's ctx
	if m.c.reg.Unknown(id) {
		// The re-read, after the late outcome of an abandoned call of
		// the owner, shares the release's ReleaseTimeout: an Unlock
		// returns within one, whatever Redis does.
		rel = scripts.WithCallBound(rel, m.c.calls.Limit(rel))
		rctx, cancel := m.c.calls.Detached(rel)
		m.c.reg.WaitLate(rctx, id)
		_ = m.reconcile(rctx, h.Args) // on failure the release below is refused or resent
		cancel()
	}
	d, ok := m.c.reg.Drop(acq)
	if !ok {
		return m.fail("release", fmt.Errorf("%w: already released", ErrNotHeld))
	}
	// The hold left the registry (nothing renews it, nor ends it at its
	// deadline): its ctx ends now, before the release reaches Redis and
	// anyone else may take the lock.
	acq.End(context.Canceled)
	var offer hub.Offer
	defer func() {
		if offer.Made() {
			// The grantee goes on only once this hold's ctx is done.
			m.c.hub.Settle(offer)
		}
	}()
	if d.Lost != nil {
		return m.fail("release", d.Lost)
	}
	var (
		res releaseResult
		err error
	)
	// A last release may hand the lock on: to a waiter of this client, or
	// one queued in Redis (a hold that came through the queue looks there
	// even when this client no longer waits on the lock).
	handOff := d.Last && d.Count == 1 && m.handsOff()
	// The last acquisition was dropped under the hold's shard mutex, and
	// no later one can write the hold: its flag is read without a lock.
	queued := handOff && h.Queued()
	if handOff && (queued || m.c.hub.Active()) {
		res, offer, err = m.releaseHandingOff(rel, h.Args, queued)
	} else {
		res, err = m.release(rel, h.Args, d.Last, d.Lease, d.Count)
	}
	if !d.Last {
		markUnknown(m.c.reg, id, err)
	}
	if err == nil && res == releaseNotOwner {
		err = fmt.Errorf("%w: the lease ran out or the key was deleted before the release", ErrLockLost)
	}
	if err != nil {
		err = m.fail("release", err)
		m.c.warn("release failed", "lock", m.opts.Name, "key", m.key, "err", err)
		return err
	}
	m.c.observe(Event{Kind: EventReleased, Name: m.opts.Name, Key: m.key, Lock: kindName(m.k), Owner: h.Owner, Ctx: ctx, Held: time.Since(acq.Start)})
	return nil
}

type releaseResult int8

const (
	releaseNotOwner releaseResult = iota - 1
	releasePartial
	releaseLast
)

// release runs the kind's release script, resending it on transport errors (the expected hold count the scripts check makes
// a resend harmless).
// count is the owner's hold count before the release.
func (m *Mutex) release(ctx context.Context, a lockArgs, last bool, lease time.Duration, count int) (releaseResult, error) {
	return m.releaseVia(ctx, m.c.rdb, a, last, lease, count)
}

// releaseVia is release with its calls sent through via.
func (m *Mutex) releaseVia(ctx context.Context, via scripts.Runner, a lockArgs, last bool, lease time.Duration, count int) (releaseResult, error) {
	c := m.c
	if last {
		lease = c.opts.WatchdogTimeout // not applied: the last hold deletes the key
	}
	r := attempt{via: via, px: c.leaseArg(max(lease, minLease)), count: count}
	n, err := c.calls.Retry(ctx, func(ctx context.Context) (int64, error) {
		return m.k.release(ctx, m, a, r)
	})
	if errors.Is(err, redis.Nil) {
		return releaseNotOwner, nil
	}
	return releaseResult(n), err
}

// Do acquires the lock with the Mutex's options (waiting up to WaitTime),
// runs fn with the ctx of the hold, and releases the lock when fn returns or
// panics. The lock is released even when ctx is cancelled meanwhile.
//
// It returns fn's error; if the hold was lost or the release failed, that
// error is joined to it, so errors.Is(err, ErrLockLost) tells that fn ran
// (at least partly) without the lock.
func (m *Mutex) Do(ctx context.Context, fn func(ctx context.Context) error) (err error) {
	if fn == nil {
		return m.fail("acquire", fmt.Errorf("%w: nil fn", ErrInvalidArgument))
	}
	return do(ctx, m, m.opts, fn)
}

// locker is what do needs of a lock handle.
type locker interface {
	TryLock(ctx context.Context, wait, lease time.Duration) (context.Context, error)
	Unlock(ctx context.Context) error
}

// do is the body of every Do: acquire with opts' wait time and lease, run
// fn with the hold's ctx, release when fn returns or panics, and join a
// release error (a lost lock) to fn's.
func do(ctx context.Context, l locker, opts LockOptions, fn func(ctx context.Context) error) (err error) {
	hctx, err := l.TryLock(ctx, opts.WaitTime, opts.Lease)
	if err != nil {
		return err
	}
	defer func() {
		if uerr := l.Unlock(hctx); uerr != nil {
			err = errors.Join(err, uerr)
		}
	}()
	return fn(hctx)
}

// IsLocked reports whether anyone holds the lock (for a read-write lock:
// either side).
func (m *Mutex) IsLocked(ctx context.Context) (bool, error) {
	n, err := scripts.Do(ctx, m.c.rdb, "exists", m.key).Int64()
	if err != nil {
		return false, m.fail("inspect", err)
	}
	return n == 1, nil
}

// HoldCount is the number of holds the owner carried by ctx has on the lock
// (0 when ctx carries no owner or it does not hold the lock).
func (m *Mutex) HoldCount(ctx context.Context) (int, error) {
	hc := m.c.reg.Of(ctx)
	if hc == nil {
		return 0, nil
	}
	n, err := scripts.Do(ctx, m.c.rdb, "hget", m.key, m.k.field(hc.Owner())).Int()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, m.fail("inspect", err)
	}
	return n, nil
}

// NoExpiry is what RemainTTL reports for a lock key without an expiry.
const NoExpiry time.Duration = -1

// RemainTTL is the time until the lock's lease runs out: 0 when the lock is
// free, NoExpiry when the key has no expiry.
func (m *Mutex) RemainTTL(ctx context.Context) (time.Duration, error) {
	ms, err := scripts.Do(ctx, m.c.rdb, "pttl", m.key).Int64()
	if err != nil {
		return 0, m.fail("inspect", err)
	}
	switch {
	case ms == -2: // no key
		return 0, nil
	case ms < 0: // no expiry
		return NoExpiry, nil
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// ForceUnlock deletes the lock whoever holds it and wakes the waiters that
// can go next. It reports whether there was a lock. Local holds of the key
// end as lost.
func (m *Mutex) ForceUnlock(ctx context.Context) (bool, error) {
	n, err := m.k.forceUnlock(ctx, m)
	if err != nil {
		return false, m.fail("force-unlock", err)
	}
	m.c.reg.LoseKey(m.key, m.fail("force-unlock", fmt.Errorf("%w: force-unlocked", ErrLockLost)))
	return n == 1, nil
}

// wellTagged reports whether key either has no "{" or has a hash tag as
// Redis reads one (the first "{" and the next "}" with text between):
// Redisson's name helpers leave a key with "{" alone, so its marker, channel
// and queue keys share its slot only when that "{" opens a real tag.
func wellTagged(key string) bool {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return true
	}
	return strings.IndexByte(key[open+1:], '}') > 0
}

// holdSpec is what a new acquisition of m is of.
func (m *Mutex) holdSpec() holds.Spec {
	_, read := m.k.(readSide) // only a read hold renews keys besides its own
	return holds.Spec{Name: m.opts.Name, Key: m.key, Kind: kindName(m.k), From: (*mutexTaker)(m), Extra: read}
}

// acquireReplicated runs one acquire attempt on a single connection to the
// key's master and, when it took the lock, WAITs there until
// LockOptions.SyncReplicas replicas acknowledge it. WAIT counts the writes
// of its own connection, which is why both run on one. An acquisition too
// few replicas acknowledged is undone on the master and reported as
// ErrNotReplicated: Redisson's checkLockSyncedSlaves, without leaving the
// lock behind.
func (m *Mutex) acquireReplicated(ctx context.Context, a lockArgs, at attempt) (int64, error) {
	conn, err := stickyConn(ctx, m.c.rdb, m.key)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	at.via = conn
	ttl, err := m.k.acquire(ctx, m, a, at)
	if err != nil || ttl != 0 {
		return ttl, err
	}
	want := m.opts.SyncReplicas
	acked, err := conn.Wait(ctx, want, m.c.opts.ReplicaTimeout).Result()
	if err == nil && acked >= int64(want) {
		return 0, nil
	}
	m.undo(ctx, a, at)
	if err != nil {
		return 0, fmt.Errorf("%w: WAIT %d: %w", ErrNotReplicated, want, err)
	}
	return 0, fmt.Errorf("%w: %d of %d replicas acknowledged within %v", ErrNotReplicated, acked, want, m.c.opts.ReplicaTimeout)
}

// undo drops the one count of the hold that attempt at took.
func (m *Mutex) undo(ctx context.Context, a lockArgs, at attempt) {
	u := attempt{via: at.via, px: at.px, count: at.count + 1}
	if _, err := m.c.calls.Retry(ctx, func(ctx context.Context) (int64, error) { return m.k.release(ctx, m, a, u) }); err != nil {
		m.c.warn("undoing an acquisition failed", "lock", m.opts.Name, "key", m.key, "err", err)
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
	return nil, fmt.Errorf("%w: SyncReplicas needs a *redis.Client or *redis.ClusterClient, not %T", ErrInvalidArgument, rdb)
}
