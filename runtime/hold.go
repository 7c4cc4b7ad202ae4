package runtime

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/leaseclock"
	"github.com/lockgen/lockgen/runtime/internal/renew"
	"github.com/lockgen/lockgen/runtime/internal/scripts"
)

// A hold is what one owner has of one lock: the local mirror of the owner's
// field in the lock hash. Every acquisition by the owner (the outer one and
// each re-entry) adds one to count, as HINCRBY does in Redis. The hold is
// renewed by the watchdog while any acquisition uses the watchdog lease.
//
// All fields are guarded by the mutex of sh, the shard of its key.
type hold struct {
	c     *Client
	sh    *shard
	name  string // logical name
	key   string // lock key
	owner string // owner token
	field string // hash field that proves the hold (renewal checks it)
	args  lockArgs
	k     kind // nil for permits
	// permit: the hold is the permits of one semaphore acquisition
	// (semaphore.go): args.key is the semaphore's timeout sorted set and
	// args.field the permit ids; the watchdog renews their scores.
	permit bool
	// queued: an acquisition of it was queued in Redis for grants, or
	// granted from there (grant.go); its last release clears the record.
	queued bool
	// from is the handle that took it: it gives back what a hold lost at
	// its deadline may still have in Redis (giveback.go).
	from giver

	count    int
	watchdog bool // renewed by the watchdog: wdAcqs > 0
	wdAcqs   int  // acquisitions with the watchdog lease
	slot     int  // cluster slot of key, for batching
	acqs     []*acquisition
	inline   [2]*acquisition // backs acqs for the common outer + one nested hold
	gone     bool            // released or lost: no longer in Client.holds
	lostErr  error           // why it was lost; nil when released normally
	// lost is set with lostErr, for readers without the shard's mutex.
	lost atomic.Bool

	// The lease clock (lease.go): the hold's term (lease end and deadline)
	// and its place on its shard's queue.
	lease leaseclock.Entry
	// The watchdog's schedule (watchdog.go).
	renew    renew.Entry // when its next renewal is due (its shard's wheel)
	inFlight bool        // a renewal of h is on the wire
}

type holdID struct{ key, field string }

// An acquisition is one successful Lock/TryLock/Do: it owns the ctx handed
// to the caller and is released exactly once.
type acquisition struct {
	h        *hold
	parent   context.Context // the caller's ctx: releases run on it, not on the hold's
	start    time.Time
	cancel   context.CancelCauseFunc
	stop     context.CancelFunc // stops the fixed-lease deadline; nil for watchdog
	watchdog bool               // has the watchdog lease
	released bool               // guarded by h.sh.mu
}

func (a *acquisition) end(cause error) {
	a.cancel(cause)
	if a.stop != nil {
		a.stop()
	}
}

// cancelAll cancels the ctx of every acquisition of h with cause.
func (h *hold) cancelAll(cause error) {
	for _, a := range h.acqs {
		a.end(cause)
	}
}

// holdContext is the ctx an acquisition hands to its caller. It carries the
// owner token (so a nested acquisition re-enters) and the acquisition (so
// Unlock knows what to release), without an allocation per value.
type holdContext struct {
	context.Context
	acq    *acquisition
	parent *holdContext // next enclosing acquisition of the same client
	own    acquisition  // backs acq: one allocation per acquisition
	fence  int64        // the acquisition's fencing token; 0: not fenced
}

type ownerKey struct{ c *Client }

// fenceKey finds the innermost fenced acquisition's token (see Fence).
type fenceKey struct{}

func (hc *holdContext) Value(k any) any {
	switch k := k.(type) {
	case ownerKey:
		if k.c == hc.acq.h.c {
			return hc
		}
	case fenceKey:
		if hc.fence != 0 {
			return hc.fence
		}
	}
	return hc.Context.Value(k)
}

// holdOf returns the innermost acquisition context of c in ctx, or nil.
func (c *Client) holdOf(ctx context.Context) *holdContext {
	hc, _ := ctx.Value(ownerKey{c}).(*holdContext)
	return hc
}

// acquisitionOf returns the innermost acquisition of field on key in the
// chain from hc, or nil.
func (c *Client) acquisitionOf(hc *holdContext, key, field string) *acquisition {
	for ; hc != nil; hc = hc.parent {
		if h := hc.acq.h; h.key == key && h.field == field {
			return hc.acq
		}
	}
	return nil
}

// holdState returns the local hold count of field on key and the PEXPIRE an
// acquisition with lease applies: never shorter than what the hold already
// counts on (its lease end, and the watchdog's lease while it renews), so
// a nested acquisition with a short lease cannot cut the outer one's.
func (c *Client) holdState(key, field string, lease time.Duration) (int, time.Duration) {
	sh := c.reg.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return holdStateLocked(sh, holdID{key, field}, lease, c.opts.WatchdogTimeout)
}

// holdStateLocked is holdState with the shard of id's key locked.
func holdStateLocked(sh *shard, id holdID, lease, watchdog time.Duration) (int, time.Duration) {
	if lease == Watchdog {
		lease = watchdog
	}
	h := sh.holds[id]
	if h == nil {
		return 0, lease
	}
	return h.count, h.leaseToKeep(lease)
}

// leaseToKeep is the PEXPIRE a request for h applies when it brings lease
// of its own: the longest of that, what the hold counts on already, and
// the watchdog's lease while it renews h. h.sh.mu is held.
func (h *hold) leaseToKeep(lease time.Duration) time.Duration {
	px := max(lease, h.leaseLeft(), minLease)
	if h.watchdog {
		px = max(px, h.c.opts.WatchdogTimeout)
	}
	return px
}

// holdSpec names what a hold is of: the lock (or semaphore) and its kind.
type holdSpec struct {
	name, key string
	k         kind
	permit    bool
	from      giver
	// confirmed, when > 0, is all of the lease Redis is known to have
	// applied from start when it is shorter than the hold's lease (a
	// watchdog hold taken by a grant cut to the waiter's record: grant.go).
	// The hold's deadline counts it, and its first renewal is due at the
	// watchdog's next tick.
	confirmed time.Duration
	// queued: a try of the acquisition queued its waiter in Redis, or it
	// was granted from there (grant.go): the release clears its record.
	queued bool
}

func (m *Mutex) holdSpec() holdSpec { return holdSpec{name: m.opts.Name, key: m.key, k: m.k, from: m} }

// addHold records a successful acquisition of key by owner (sent at start
// with the given lease) and returns the ctx for the caller.
func (c *Client) addHold(parent context.Context, m *Mutex, args lockArgs, lease time.Duration, start time.Time) (context.Context, error) {
	return c.addHoldAs(parent, m.holdSpec(), args, lease, start, 0)
}

// addHoldAs is addHold for any hold, with the acquisition's fencing token
// (0: none). The contexts are made before the shard is locked: nothing is
// allocated under it.
func (c *Client) addHoldAs(parent context.Context, spec holdSpec, args lockArgs, lease time.Duration, start time.Time, fence int64) (context.Context, error) {
	name, key, owner, field := spec.name, spec.key, args.ownerID(), args.fieldID()
	hc := &holdContext{parent: c.holdOf(parent), fence: fence}
	acq := &hc.own
	hc.acq = acq
	*acq = acquisition{parent: parent, start: start, watchdog: lease == Watchdog}
	cctx, cancel := context.WithCancelCause(parent)
	acq.cancel = cancel
	hc.Context = cctx
	if lease != Watchdog {
		cause := &LockError{Op: "lease", Name: name, Key: key,
			Err: fmt.Errorf("%w: fixed lease of %v ran out", ErrLockLost, lease)}
		hc.Context, acq.stop = context.WithDeadlineCause(cctx, start.Add(lease-leaseclock.Drift(lease)), cause)
	}
	id := holdID{key, field}
	sh := c.reg.shard(key)
	sh.mu.Lock()
	if c.reg.closed.Load() {
		sh.mu.Unlock()
		acq.end(ErrClosed)
		return nil, ErrClosed
	}
	h := sh.holds[id]
	if h == nil {
		h = &hold{c: c, sh: sh, name: name, key: key, owner: owner, field: field, args: args, k: spec.k, permit: spec.permit, from: spec.from}
		h.acqs = h.inline[:0]
		if c.cluster {
			h.slot = scripts.KeySlot(key)
		}
		sh.holds[id] = h
	}
	acq.h = h
	h.count++
	h.queued = h.queued || spec.queued
	c.wd.start(c)
	effective := lease
	if lease == Watchdog {
		effective = c.opts.WatchdogTimeout
		h.wdAcqs++
		if !h.watchdog {
			h.watchdog = true
			if spec.confirmed > 0 && spec.confirmed < effective {
				c.wd.start(c)
				c.wd.scheduleAt(h, start) // due now: the next tick renews it
			} else {
				c.wd.schedule(c, h, start)
			}
		}
	}
	if spec.confirmed > 0 {
		effective = min(effective, spec.confirmed)
	}
	h.confirmLocked(start, effective)
	h.acqs = append(h.acqs, acq)
	sh.mu.Unlock()
	return hc, nil
}

// dropAcquisition marks acq released and takes it off its hold. It reports
// whether this was the last hold of the owner (the key is then released in
// Redis), the lease to re-apply otherwise, the hold count before, and the
// loss if the hold was lost.
func (c *Client) dropAcquisition(acq *acquisition) (last bool, lease time.Duration, count int, lost error, ok bool) {
	sh := acq.h.sh
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if acq.released {
		return false, 0, 0, nil, false
	}
	acq.released = true
	h := acq.h
	if acq.watchdog {
		// Renewal stops with the last watchdog acquisition: the fixed
		// leases left keep their own end.
		h.wdAcqs--
		h.watchdog = h.wdAcqs > 0
	}
	for i, a := range h.acqs {
		if a == acq {
			h.acqs = append(h.acqs[:i], h.acqs[i+1:]...)
			break
		}
	}
	if h.lostErr != nil {
		return false, 0, 0, h.lostErr, true
	}
	count = h.count
	h.count--
	if h.count <= 0 {
		h.gone = true
		h.stopLocked()
		delete(sh.holds, holdID{h.key, h.field})
		return true, 0, count, nil, true
	}
	// The holds left keep what they count on: a partial release never
	// shortens the key's TTL below the hold's lease end.
	return false, h.leaseToKeep(0), count, nil, true
}

// loseLocked ends h: it is removed from the registry (so the watchdog
// forgets it) and every ctx of it is cancelled with cause. h.sh.mu is held.
func (c *Client) loseLocked(h *hold, cause error) {
	if h.gone {
		return
	}
	h.gone = true
	h.lostErr = cause
	h.lost.Store(true)
	h.stopLocked()
	delete(h.sh.holds, holdID{h.key, h.field})
	h.cancelAll(cause)
	c.warn("lock lost", "lock", h.name, "key", h.key, "cause", cause)
	c.observe(Event{Kind: EventLost, Name: h.name, Key: h.key, Lock: h.kindName(), Owner: h.owner, Err: cause})
}

// loseKey ends every local hold of key (after ForceUnlock).
func (c *Client) loseKey(key string, cause error) {
	sh := c.reg.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for id, h := range sh.holds {
		if id.key == key {
			c.loseLocked(h, cause)
		}
	}
}

// kindName is the Event.Lock of h.
func (h *hold) kindName() string {
	if h.permit {
		return "semaphore"
	}
	return kindName(h.k)
}

// lockArgs are the script arguments naming one owner's hold of one key,
// boxed once for all the calls of an acquisition and its release.
type lockArgs struct {
	key   any // lock key
	owner any // owner token
	field any // hash field proving the hold (the owner, or "<owner>:write")
}

func newLockArgs(key, owner, field string) lockArgs {
	a := lockArgs{key: key, owner: owner, field: owner}
	if field != owner {
		a.field = field
	}
	return a
}

func (a lockArgs) ownerID() string { return a.owner.(string) }
func (a lockArgs) fieldID() string { return a.field.(string) }
