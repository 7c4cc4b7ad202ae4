package holds

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/leaseclock"
	"github.com/lockgen/lockgen/runtime/internal/renew"
)

// ID names one owner's hold of one lock: the key and the hash field
// proving it.
type ID struct{ Key, Field string }

// Args are the script arguments of one owner's hold of one key, boxed once
// for all the calls of an acquisition and its release.
type Args struct {
	Key   any // lock key
	Owner any // owner token
	Field any // the owner, or "<owner>:write"
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

// OwnerID and FieldID unbox Owner and Field.
func (a Args) OwnerID() string { return a.Owner.(string) }

func (a Args) FieldID() string { return a.Field.(string) }

// A Taker is the handle that took a hold.
type Taker interface {
	// GiveBackLost starts giving back what h's owner, ended at its
	// deadline or by Shutdown, may still have in Redis; ExtraKeys are the
	// keys renewed with h besides its key. Both run under h's shard mutex:
	// they must not block.
	GiveBackLost(h *Hold)
	ExtraKeys(h *Hold) []string
}

// A Hold is one owner's field in one lock hash: its count is one per
// acquisition (HINCRBY in Redis), renewed while any acquisition has the
// watchdog lease. Exported fields never change; the others are guarded by
// its shard's mutex.
type Hold struct {
	// What a renewal round touches stays in the first two cache lines
	// (TestHoldKeepsWhatARoundReadsInTwoLines): few holds are in cache.
	sh       *shard
	inFlight bool // a renewal of it is on the wire
	gone     bool // released or lost: no longer in the registry
	watchdog bool // wdAcqs > 0
	extra    bool // see Spec.Extra
	// Permit: a semaphore acquisition's permits: Args.Key is the timeout
	// set, Field the permit ids.
	Permit bool
	queued bool             // see Spec.Queued
	lease  leaseclock.Entry // its term and its place on the lease clock
	renew  renew.Entry      // when its next renewal is due
	seq    uint64           // creation order, which a round sends in
	Key    string           // the lock key (for Permit, the semaphore's)
	Field  string           // the hash field renewals check
	Slot   int              // cluster slot of Key

	Args  Args
	Name  string // logical name
	Owner string // owner token
	Kind  string // what it is a hold of, as events name it
	From  Taker
	// Group: the atomic multi-lock it is a member of (Spec.Group), whose
	// loss its loss is reported as; nil for other holds.
	Group *Group

	count   int
	wdAcqs  int32       // acquisitions with the watchdog lease
	lost    atomic.Bool // lostErr != nil, for readers without the mutex
	acqs    []*Acquisition
	inline  [2]*Acquisition // backs acqs for the common outer + one nested
	lostErr error           // why it was lost
}

// A Group is one acquisition of an atomic multi-lock, whose members' holds
// are reported as it: Name and Keys (comma-separated) are the multi-lock's.
// Its loss is reported once, and never before its acquisition: a member
// may be lost (a short fixed lease) before the caller has reported the
// acquisition, which goes on the lease clock member by member.
type Group struct {
	Name, Keys string

	mu        sync.Mutex
	announced bool  // the acquisition was reported (Announced)
	done      bool  // its loss was reported, or is pending
	loss      Event // a loss before Announced, reported by it
}

// Event is what a Group's loss is reported with.
type Event struct {
	Owner    string
	Deadline time.Time
	Cause    error
}

// Lost records a member's loss, e, and reports whether the caller reports
// it now: the first loss of an announced group. One before Announced is
// kept for it.
func (g *Group) Lost(e Event) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.done {
		return false
	}
	g.done = true
	if !g.announced {
		g.loss = e
		return false
	}
	return true
}

// Announced marks g's acquisition reported, and returns the loss recorded
// before, for the caller to report now (ok).
func (g *Group) Announced() (e Event, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.announced = true
	return g.loss, g.done && g.loss.Cause != nil
}

// Lost reports whether h was lost. It takes no lock.
func (h *Hold) Lost() bool { return h.lost.Load() }

// Deadline is h's deadline on the lease clock (zero before its first
// confirmation).
func (h *Hold) Deadline() time.Time {
	h.sh.mu.Lock()
	defer h.sh.mu.Unlock()
	return h.lease.Valid
}

// DeadlineLocked is Deadline for a caller that holds h's shard mutex
// (Config.Lost).
func (h *Hold) DeadlineLocked() time.Time { return h.lease.Valid }

// Count is the hold count. h's shard mutex is held.
func (h *Hold) Count() int { return h.count }

// Queued reports whether an acquisition of h was queued in Redis for
// grants: read after its last Drop, or with h's mutex held.
func (h *Hold) Queued() bool { return h.queued }

// An Acquisition is one successful Lock/TryLock/Do: it owns the ctx handed
// to the caller, and is released once.
type Acquisition struct {
	h        *Hold
	Parent   context.Context // the caller's ctx: releases run on it
	Start    time.Time
	Group    *Group // the atomic multi-lock that made this acquisition (Spec.Group); nil for a member's own
	cancel   context.CancelCauseFunc
	stop     context.CancelFunc // ends the fixed-lease deadline; nil: the watchdog lease
	unfollow func() bool        // see Add's downgrade case
	released bool               // guarded by h.sh.mu
}

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

// leave takes h out of the registry. h.sh.mu is held.
func (h *Hold) leave() {
	h.gone = true
	h.sh.due.Remove(h)
	delete(h.sh.holds, ID{h.Key, h.Field})
}

func (h *Hold) cancelAll(cause error) {
	for _, a := range h.acqs {
		a.End(cause)
	}
}

// Context is the ctx an acquisition hands to its caller: it carries the
// owner token (a nested acquisition re-enters) and the acquisition, in one
// allocation.
type Context struct {
	context.Context
	parent *Context // next enclosing acquisition of the same registry
	own    Acquisition
	fence  int64 // fencing token; 0: not fenced
}

// Acquisition, Parent (the next enclosing Context of the same registry,
// or nil) and Owner (the owner token) are what hc carries.
func (hc *Context) Acquisition() *Acquisition { return &hc.own }

func (hc *Context) Parent() *Context { return hc.parent }

func (hc *Context) Owner() string { return hc.own.h.Owner }

type ownerKey struct{ r *Registry }

// FenceKey, as a ctx value key, finds the innermost fencing token (int64).
type FenceKey struct{}

// Value implements context.Context.
func (hc *Context) Value(k any) any {
	switch k := k.(type) {
	case ownerKey:
		if k.r == hc.own.h.sh.r {
			return hc
		}
	case FenceKey:
		if hc.fence != 0 {
			return hc.fence
		}
	}
	return hc.Context.Value(k)
}

// Find returns the innermost acquisition of id in hc's chain, or nil.
func Find(hc *Context, id ID) *Acquisition {
	for ; hc != nil; hc = hc.parent {
		if h := hc.own.h; h.Key == id.Key && h.Field == id.Field {
			return &hc.own
		}
	}
	return nil
}

// MinLease is the shortest lease a request applies.
const MinLease = 10 * time.Millisecond

// leaseToKeep is the PEXPIRE a request for h with lease applies: never
// less than what h counts on already, nor the watchdog's lease while it
// renews h, so a nested or partial release never cuts the outer one's.
// h.sh.mu is held.
func (h *Hold) leaseToKeep(lease time.Duration) time.Duration {
	px := max(lease, h.lease.Left(time.Now()), MinLease)
	if h.watchdog {
		px = max(px, h.sh.r.cfg.Watchdog)
	}
	return px
}
