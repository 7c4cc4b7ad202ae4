package holds

import (
	"context"
	"errors"
	"hash/maphash"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/errs"
	"github.com/lockgen/lockgen/runtime/internal/leaseclock"
	"github.com/lockgen/lockgen/runtime/internal/renew"
	"github.com/lockgen/lockgen/runtime/internal/scripts"
)

// Config is what a Registry is told by its Client.
type Config struct {
	// Watchdog is the lease of holds the watchdog renews.
	Watchdog time.Duration
	Cluster  bool   // set Hold.Slot, for batching by slot
	Started  func() // called at every acquisition: the watchdog starts on first use
	// Lost is told of every hold lost, after its contexts were cancelled,
	// under its shard's mutex: it must not block.
	Lost func(h *Hold, cause error)
	// Expired is the cause of a hold ended at its deadline; why says how.
	Expired func(h *Hold, why string) error
}

// A Registry is the holds of one Client. Make it with New.
type Registry struct {
	cfg        Config
	timing     renew.Timing
	seed       maphash.Seed
	shards     [shardCount]shard
	closed     atomic.Bool
	clock      leaseclock.Clock
	stop       chan struct{} // closed by Close: ends the clock
	unknownN   atomic.Int32  // marks in all shards: while 0 Mark takes no lock
	unknownGen atomic.Uint64 // numbers the unknown marks
	seq        atomic.Uint64 // numbers the holds (Hold.seq)
}

const shardCount = 512

type shard struct {
	r       *Registry
	mu      sync.Mutex
	holds   map[ID]*Hold
	turns   map[ID]chan struct{} // calls in flight (calls.go)
	unknown map[ID]uint64        // the mark's generation
	late    map[ID]late          // abandoned calls still on their way
	wheel   renew.Wheel[*Hold]
	due     leaseclock.Queue[*Hold]
}

// New returns an empty Registry.
func New(cfg Config) *Registry {
	r := &Registry{cfg: cfg, timing: renew.NewTiming(cfg.Watchdog), seed: maphash.MakeSeed(), stop: make(chan struct{})}
	for i := range r.shards {
		s := &r.shards[i]
		s.r = r
		s.holds = make(map[ID]*Hold)
		s.turns = make(map[ID]chan struct{})
		s.unknown = make(map[ID]uint64)
		s.late = make(map[ID]late)
		s.due.Init()
	}
	return r
}

// Timing is the renewal timing of the watchdog holds, WatchdogLease their
// lease (Config.Watchdog); Cluster reports whether holds carry their slot
// for batching (Config.Cluster).
func (r *Registry) Timing() renew.Timing         { return r.timing }
func (r *Registry) WatchdogLease() time.Duration { return r.cfg.Watchdog }
func (r *Registry) Cluster() bool                { return r.cfg.Cluster }

func (r *Registry) shard(key string) *shard {
	return &r.shards[maphash.String(r.seed, key)%shardCount]
}

// Len is the number of holds.
func (r *Registry) Len() int {
	n := 0
	r.each(func(*Hold) { n++ })
	return n
}

// each calls f for every hold, with its shard's mutex held.
func (r *Registry) each(f func(h *Hold)) {
	for i := range r.shards {
		s := &r.shards[i]
		s.mu.Lock()
		for _, h := range s.holds {
			f(h)
		}
		s.mu.Unlock()
	}
}

// Close refuses new holds, ends the clock and cancels the ctx of every
// hold with cause(h), forgetting none (they stay in Redis until released
// or expired). It reports false when closed already.
func (r *Registry) Close(cause func(h *Hold) error) bool {
	if !r.closed.CompareAndSwap(false, true) {
		return false
	}
	close(r.stop)
	// A hold added meanwhile is seen here or refused by Add.
	r.each(func(h *Hold) {
		h.sh.due.Remove(h)
		h.cancelAll(cause(h))
	})
	r.clock.Wait()
	return true
}

// LoseAll ends every hold with cause(h) and has its taker give back what
// Redis may still have of it (Shutdown's grace period is over). Once
// closed it does nothing: Close ended every hold, and each stays in Redis
// for its holder's release.
func (r *Registry) LoseAll(cause func(h *Hold) error) {
	r.each(func(h *Hold) {
		if r.closed.Load() {
			return
		}
		r.loseLocked(h, cause(h))
		h.From.GiveBackLost(h)
	})
}

// Of returns the innermost acquisition Context of r in ctx, or nil.
func (r *Registry) Of(ctx context.Context) *Context {
	hc, _ := ctx.Value(ownerKey{r}).(*Context)
	return hc
}

// Hold returns the hold id, or nil. Only its exported fields, which never
// change, may be read without its shard's mutex.
func (r *Registry) Hold(id ID) *Hold {
	sh := r.shard(id.Key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.holds[id]
}

// State returns the hold count of id and the PEXPIRE an acquisition with
// lease (0: the watchdog's) applies (leaseToKeep).
func (r *Registry) State(id ID, lease time.Duration) (int, time.Duration) {
	sh := r.shard(id.Key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return r.stateLocked(sh, id, lease)
}

func (r *Registry) stateLocked(sh *shard, id ID, lease time.Duration) (int, time.Duration) {
	if lease == 0 {
		lease = r.cfg.Watchdog
	}
	h := sh.holds[id]
	if h == nil {
		return 0, lease
	}
	return h.count, h.leaseToKeep(lease)
}

// Spec names what a new acquisition is of.
type Spec struct {
	Name, Key, Kind string
	Permit          bool
	From            Taker
	Extra           bool   // it may have keys renewed with it (From.ExtraKeys)
	Group           *Group // the atomic multi-lock acquisition it is a member of (Hold.Group)
	// Confirmed, when > 0, is all the lease Redis is known to have applied
	// from start, if shorter than the hold's (a grant cut to the waiter's
	// record): the deadline counts it, and the first renewal is due now.
	Confirmed time.Duration
	Queued    bool  // queued in Redis by a try, or granted from there; its last release clears the record
	Fence     int64 // fencing token (0: none)
	LeaseEnd  error // the cause of the end of a fixed lease
}

// Add records a successful acquisition of args (sent at start with lease:
// 0 is the watchdog's) and returns the ctx for the caller, or nil once the
// Registry is closed. Its ctx is made before the shard's mutex is taken; a
// new Hold and the growth of the shard's map, schedules and the hold's
// acquisitions are allocated under it.
func (r *Registry) Add(parent context.Context, spec Spec, args Args, lease time.Duration, start time.Time) *Context {
	id := ID{spec.Key, args.FieldID()}
	hc := r.newContext(parent, spec, id, lease, start)
	acq := &hc.own
	sh := r.shard(spec.Key)
	sh.mu.Lock()
	if r.closed.Load() {
		sh.mu.Unlock()
		acq.End(context.Canceled)
		return nil
	}
	h := sh.holds[id]
	if h == nil {
		h = &Hold{sh: sh, Name: spec.Name, Key: spec.Key, Owner: args.OwnerID(), Field: id.Field, Args: args,
			Kind: spec.Kind, Group: spec.Group, Permit: spec.Permit, From: spec.From, extra: spec.Extra, seq: r.seq.Add(1)}
		h.acqs = h.inline[:0]
		if r.cfg.Cluster {
			h.Slot = scripts.KeySlot(spec.Key)
		}
		sh.holds[id] = h
	}
	acq.h = h
	h.count++
	h.queued = h.queued || spec.Queued
	r.cfg.Started()
	effective := lease
	if lease == 0 {
		effective = r.cfg.Watchdog
		h.wdAcqs++
		if !h.watchdog {
			h.watchdog = true
			due := start.Add(r.timing.Period)
			if spec.Confirmed > 0 && spec.Confirmed < effective {
				due = start // the next tick renews it
			}
			sh.wheel.Put(h, due, r.timing)
		}
	}
	if spec.Confirmed > 0 {
		effective = min(effective, spec.Confirmed)
	}
	now := time.Now()
	r.confirmLocked(h, start, now, effective)
	h.acqs = append(h.acqs, acq)
	// Recorded past its deadline (the process was frozen between the
	// try's send and now): ended before it is handed out, not at the
	// clock's next wake-up, so the caller never acts on it.
	late := !h.gone && !now.Before(h.lease.Valid)
	sh.mu.Unlock()
	if late {
		(*clocked)(r).ExpireDue(now)
	}
	return hc
}

// newContext makes the ctx of a new acquisition, its hold not set yet.
func (r *Registry) newContext(parent context.Context, spec Spec, id ID, lease time.Duration, start time.Time) *Context {
	hc := &Context{parent: r.Of(parent), fence: spec.Fence}
	acq := &hc.own
	*acq = Acquisition{Parent: parent, Start: start, Group: spec.Group}
	base := parent
	outer := hc.parent
	if outer != nil && outer.own.h.Key == id.Key && outer.own.h.Field != id.Field {
		// Another hold of the key by its owner (a downgrade: the read
		// side taken by the writer) does not end with that hold's
		// release, only with its loss, with what lies between it and
		// parent, or with the end (or deadline) of what the key's first
		// hold in the chain was taken under.
		under := outer
		for under.parent != nil && under.parent.own.h.Key == id.Key {
			under = under.parent
		}
		base = valuesOf{Context: under.own.Parent, values: parent}
	}
	cctx, cancel := context.WithCancelCause(base)
	acq.cancel = cancel
	if base != parent {
		acq.unfollow = context.AfterFunc(parent, func() {
			if outer.Err() == nil || errors.Is(context.Cause(outer), errs.LockLost) {
				cancel(context.Cause(parent))
			}
		})
	}
	hc.Context = cctx
	if lease != 0 {
		hc.Context, acq.stop = context.WithDeadlineCause(cctx, start.Add(lease-leaseclock.Drift(lease)), spec.LeaseEnd)
	}
	return hc
}

// valuesOf has values' values and its Context's end and deadline.
type valuesOf struct {
	context.Context
	values context.Context
}

func (c valuesOf) Value(key any) any { return c.values.Value(key) }

// Dropped is what Drop found of an acquisition.
type Dropped struct {
	Last  bool          // the owner's last hold: the key is released in Redis
	Lease time.Duration // otherwise, the lease the holds left keep
	Count int           // the hold count before
	Lost  error         // why the hold was lost, if it was
}

// Drop marks acq released and takes it off its hold; false: released
// already.
func (r *Registry) Drop(acq *Acquisition) (Dropped, bool) {
	sh := acq.h.sh
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if acq.released {
		return Dropped{}, false
	}
	acq.released = true
	h := acq.h
	if acq.stop == nil { // the watchdog lease
		h.wdAcqs--
		h.watchdog = h.wdAcqs > 0
	}
	if i := slices.Index(h.acqs, acq); i >= 0 {
		h.acqs = slices.Delete(h.acqs, i, i+1) // clears the slot: a dead clock slot may keep h a while
	}
	if h.lostErr != nil {
		return Dropped{Lost: h.lostErr}, true
	}
	d := Dropped{Count: h.count}
	h.count--
	if d.Last = h.count <= 0; d.Last {
		h.leave()
	} else {
		d.Lease = h.leaseToKeep(0)
	}
	return d, true
}

// loseLocked takes h out of the registry and cancels its ctxs with cause.
// h.sh.mu is held.
func (r *Registry) loseLocked(h *Hold, cause error) {
	if h.gone {
		return
	}
	h.leave()
	h.lostErr = cause
	h.lost.Store(true)
	h.cancelAll(cause)
	r.cfg.Lost(h, cause)
}

// Lose ends the hold id, if there is one, with the cause made of it.
func (r *Registry) Lose(id ID, cause func(h *Hold) error) {
	sh := r.shard(id.Key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if h := sh.holds[id]; h != nil {
		r.loseLocked(h, cause(h))
	}
}

// LoseKey ends every hold of key with cause, and returns them.
func (r *Registry) LoseKey(key string, cause error) (ended []*Hold) {
	sh := r.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for id, h := range sh.holds {
		if id.Key == key {
			r.loseLocked(h, cause)
			ended = append(ended, h)
		}
	}
	return ended
}

// GiveBack has the takers of hs, ended, give back what Redis may still
// have of them (as LoseAll does).
func (r *Registry) GiveBack(hs []*Hold) {
	for _, h := range hs {
		h.sh.mu.Lock()
		h.From.GiveBackLost(h)
		h.sh.mu.Unlock()
	}
}
