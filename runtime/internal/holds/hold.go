package holds

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/leaseclock"
	"github.com/lockgen/lockgen/runtime/internal/renew"
)

// ID names one owner's hold of one lock: the lock key and the hash field
// that proves the hold.
type ID struct{ Key, Field string }

// Args are the script arguments naming one owner's hold of one key, boxed
// once for all the calls of an acquisition and its release.
type Args struct {
	Key   any // lock key
	Owner any // owner token
	Field any // hash field proving the hold (the owner, or "<owner>:write")
}

// NewArgs returns the Args of owner's hold of key, proved by field.
func NewArgs(key, owner, field string) Args {
	a := Args{Key: key, Owner: owner}
	a.Field = a.Owner // one box for both
	if field != owner {
		a.Field = field
	}
	return a
}

// OwnerID is the owner token.
func (a Args) OwnerID() string { return a.Owner.(string) }

// FieldID is the field.
func (a Args) FieldID() string { return a.Field.(string) }

// A Taker is the handle that took a hold.
type Taker interface {
	// GiveBackLost starts giving back what the owner of h, ended at its
	// deadline or by Shutdown, may still have in Redis. h's shard mutex is
	// held: it must not block.
	GiveBackLost(h *Hold)
	// ExtraKeys are the keys renewed with h besides its key. h's shard
	// mutex is held.
	ExtraKeys(h *Hold) []string
}

// A Hold is what one owner has of one lock: the local mirror of the
// owner's field in the lock hash, its count one per acquisition (as
// HINCRBY in Redis), renewed while any acquisition uses the watchdog
// lease. The exported fields never change; the others are guarded by its
// shard's mutex.
type Hold struct {
	// What a renewal round reads and writes comes first, in the first two
	// cache lines (see TestHoldKeepsWhatARoundReadsInTwoLines): a round
	// touches every hold it renews, few of them in cache.
	sh       *shard
	inFlight bool // a renewal of it is on the wire
	gone     bool // released or lost: no longer in the registry
	watchdog bool // renewed by the watchdog: wdAcqs > 0
	extra    bool // see Spec.Extra
	// Permit: the permits of one semaphore acquisition: Args.Key is the
	// semaphore's timeout set, Field the permit ids (renewals extend them).
	Permit bool
	queued bool             // see Spec.Queued; its last release clears the record
	lease  leaseclock.Entry // its term and its place on the lease clock
	renew  renew.Entry      // when its next renewal is due
	seq    uint64           // the order holds were made in, which a round sends them in
	Key    string           // the lock key (for Permit, the semaphore's)
	Field  string           // hash field that proves the hold (renewal checks it)
	Slot   int              // cluster slot of Key, for batching

	Args  Args
	Name  string // logical name
	Owner string // owner token
	Kind  string // what it is a hold of, as events name it
	From  Taker

	count   int
	wdAcqs  int // acquisitions with the watchdog lease
	acqs    []*Acquisition
	inline  [2]*Acquisition // backs acqs for the common outer + one nested hold
	lostErr error           // why it was lost; nil when released normally
	lost    atomic.Bool     // set with lostErr, for readers without the mutex
}

// Lost reports whether h was lost. It takes no lock.
func (h *Hold) Lost() bool { return h.lost.Load() }

// Deadline is h's deadline on the lease clock (zero before its first
// confirmation). It takes h's shard mutex.
func (h *Hold) Deadline() time.Time {
	h.sh.mu.Lock()
	defer h.sh.mu.Unlock()
	return h.lease.Valid
}

// Count is the hold count. h's shard mutex is held.
func (h *Hold) Count() int { return h.count }

// Queued reports whether an acquisition of h was queued in Redis for
// grants: after its last acquisition was dropped, or h's mutex held.
func (h *Hold) Queued() bool { return h.queued }

// An Acquisition is one successful Lock/TryLock/Do: it owns the ctx handed
// to the caller, and is released once.
type Acquisition struct {
	h        *Hold
	Parent   context.Context // the caller's ctx: releases run on it, not on the hold's
	Start    time.Time
	cancel   context.CancelCauseFunc
	stop     context.CancelFunc // stops the fixed-lease deadline; nil for watchdog
	unfollow func() bool        // stops following the ctx an outer hold of the lock was taken under
	watchdog bool               // has the watchdog lease
	released bool               // guarded by h.sh.mu
}

// Hold is the hold acq is of.
func (a *Acquisition) Hold() *Hold { return a.h }

// End cancels acq's ctx with cause.
func (a *Acquisition) End(cause error) {
	a.cancel(cause)
	if a.stop != nil {
		a.stop()
	}
	if a.unfollow != nil {
		a.unfollow()
	}
}

// cancelAll cancels the ctx of every acquisition of h with cause.
func (h *Hold) cancelAll(cause error) {
	for _, a := range h.acqs {
		a.End(cause)
	}
}

// Context is the ctx an acquisition hands to its caller: it carries the
// owner token (a nested acquisition re-enters) and the acquisition,
// without an allocation per value.
type Context struct {
	context.Context
	acq    *Acquisition
	parent *Context // next enclosing acquisition of the same registry
	own    Acquisition
	fence  int64 // the acquisition's fencing token; 0: not fenced
}

// Acquisition is the acquisition hc carries.
func (hc *Context) Acquisition() *Acquisition { return hc.acq }

// Parent is the next enclosing acquisition's Context of the same
// registry, or nil.
func (hc *Context) Parent() *Context { return hc.parent }

// Owner is the owner token hc carries.
func (hc *Context) Owner() string { return hc.acq.h.Owner }

type ownerKey struct{ r *Registry }

// FenceKey, as a ctx value key, finds the innermost fencing token (int64).
type FenceKey struct{}

// Value implements context.Context.
func (hc *Context) Value(k any) any {
	switch k := k.(type) {
	case ownerKey:
		if k.r == hc.acq.h.sh.r {
			return hc
		}
	case FenceKey:
		if hc.fence != 0 {
			return hc.fence
		}
	}
	return hc.Context.Value(k)
}

// Find returns the innermost acquisition of id in the chain from hc, or
// nil.
func Find(hc *Context, id ID) *Acquisition {
	for ; hc != nil; hc = hc.parent {
		if h := hc.acq.h; h.Key == id.Key && h.Field == id.Field {
			return hc.acq
		}
	}
	return nil
}

// MinLease is the shortest lease a request applies.
const MinLease = 10 * time.Millisecond

// leaseToKeep is the PEXPIRE a request for h with lease applies: the
// longest of that, what the hold counts on already, and the watchdog's
// lease while it renews h, so a nested or partial release never cuts the
// outer one's. h.sh.mu is held.
func (h *Hold) leaseToKeep(lease time.Duration) time.Duration {
	px := max(lease, h.lease.Left(time.Now()), MinLease)
	if h.watchdog {
		px = max(px, h.sh.r.cfg.Watchdog)
	}
	return px
}
