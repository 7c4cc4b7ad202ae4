package holds

import (
	"math"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/leaseclock"
	"github.com/lockgen/lockgen/runtime/internal/renew"
)

// The lease clock: each shard keeps a queue of its holds under its own
// mutex, and one clock goroutine per Registry ends those due.

// LeaseEntry places h on the lease clock.
func (h *Hold) LeaseEntry() *leaseclock.Entry { return &h.lease }

// confirmLocked records that a request sent at sent, whose reply was read
// at replied, made Redis hold h for at least lease from then on. h.sh.mu
// is held.
func (r *Registry) confirmLocked(h *Hold, sent, replied time.Time, lease time.Duration) {
	if h.gone || !h.lease.Confirm(sent, lease, replied) {
		return
	}
	// Later confirmations only move the deadline (leaseclock.Queue.Expire).
	r.clock.Start((*clocked)(r), r.stop)
	if h.sh.due.Put(h) {
		r.clock.Due(h.lease.Valid)
	}
}

// clocked is the registry as the clock sees it.
type clocked Registry

// Earliest is the earliest deadline of any shard (leaseclock.Nanos), or
// leaseclock.None.
func (c *clocked) Earliest() int64 {
	m := int64(leaseclock.None)
	for i := range c.shards {
		m = min(m, c.shards[i].due.Head())
	}
	return m
}

// ExpireDue ends the holds whose deadline is past.
func (c *clocked) ExpireDue(now time.Time) {
	r := (*Registry)(c)
	for i := range c.shards {
		if sh := &c.shards[i]; sh.due.Head() <= leaseclock.Nanos(now) {
			sh.mu.Lock()
			sh.due.Expire(now, r.expire)
			sh.mu.Unlock()
		}
	}
}

// expire ends h at its deadline. h.sh.mu is held.
func (r *Registry) expire(h *Hold) {
	why := "fixed lease ran out"
	if h.watchdog {
		why = "lease ran out without a confirmed renewal"
	}
	// Asked before h leaves the registry: another hold of the owner on
	// the key (a read hold beside its write hold, after a downgrade)
	// keeps the key alive past h's fixed lease, and h's field with it.
	shared := !h.watchdog && r.ownerSharesKeyLocked(h)
	r.loseLocked(h, r.cfg.Expired(h, why))
	if h.watchdog || shared {
		// Renewals since the last confirmed one may have set a lease
		// again; or the key lives on for another hold.
		h.From.GiveBackLost(h)
	}
}

// ownerSharesKeyLocked reports whether h's owner has another hold of h's
// key (a key's holds are all in its shard). h.sh.mu is held; a fixed
// lease that runs out unreleased is rare enough for the walk.
func (r *Registry) ownerSharesKeyLocked(h *Hold) bool {
	for id, o := range h.sh.holds {
		if o != h && id.Key == h.Key && o.Owner == h.Owner {
			return true
		}
	}
	return false
}

// The watchdog's side: the holds due for renewal off the shards' wheels,
// and what each renewal found.

// RenewEntry places h on its shard's renewal wheel.
func (h *Hold) RenewEntry() *renew.Entry { return &h.renew }

// A Due is a hold taken off the wheel for a renewal. Times are
// leaseclock.Nanos; Seq and Slot are copied so that sorting and batching
// read no hold.
type Due struct {
	H     *Hold
	At    int64    // when its renewal was due
	Extra []string // its extra keys (nil: none)
	// Valid is its deadline when taken: a call must end by the earliest
	// of its holds' (a confirmation may move it later, never earlier).
	Valid int64
	Seq   uint64
	Slot  int
}

// TakeDue appends to due the holds due by now (all: every watchdog hold),
// marked in flight, with their extra keys and deadlines; holds due in the
// next period/4 fill up the last batch of batch holds (renewing a little
// early costs nothing, a call for a handful of holds does). Pass a due
// with room for about as many as last time.
func (r *Registry) TakeDue(now time.Time, all bool, batch int, due []Due) []Due {
	take := func(h *Hold) bool { // its shard's mutex is held
		if h.gone || !h.watchdog || h.inFlight {
			return false
		}
		h.inFlight = true
		u := Due{H: h, At: h.renew.Due, Valid: leaseclock.Nanos(h.lease.Valid), Seq: h.seq, Slot: h.Slot}
		if h.extra {
			u.Extra = h.From.ExtraKeys(h)
		}
		due = append(due, u)
		return true
	}
	for i := range r.shards {
		sh := &r.shards[i]
		sh.mu.Lock()
		if all {
			for _, h := range sh.holds {
				take(h)
			}
		}
		sh.wheel.TakeDue(now, r.timing, take)
		sh.mu.Unlock()
	}
	horizon := r.timing.EarlyHorizon(now)
	room := func() bool { return len(due)%batch != 0 }
	for i := 0; i < len(r.shards) && len(due) > 0 && room(); i++ {
		sh := &r.shards[i]
		sh.mu.Lock()
		sh.wheel.TakeEarly(horizon, r.timing, room, take)
		sh.mu.Unlock()
	}
	return due
}

// Deadline is the earliest deadline of the holds of batches, as taken.
func Deadline(batches [][]Due) time.Time {
	d := int64(math.MaxInt64)
	for _, b := range batches {
		for _, u := range b {
			d = min(d, u.Valid)
		}
	}
	return leaseclock.Time(d)
}

// A Renewal is what one renewal found of a hold.
type Renewal int8

const (
	Unconfirmed Renewal = iota // no reply: try again soon
	Renewed                    // the key still holds the owner: extended
	Gone                       // the key no longer holds the owner
)

// ReportAll applies what the renewal of each hold of b, sent at sent,
// its reply read at now, found (res(j) for b[j]; a reply read after the
// hold's deadline confirms nothing: leaseclock.Term), and returns how many
// were confirmed. A hold gone is lost with cause(h); an unconfirmed one is
// tried again soon, its deadline staying where the last confirmation put
// it (the clock enforces it). It takes a shard's mutex once for each run
// of its holds in b (TakeDue takes holds shard by shard, so a batch has
// long runs).
func (r *Registry) ReportAll(b []Due, res func(j int) Renewal, sent, now time.Time, cause func(h *Hold) error) int {
	confirmed := 0
	var sh *shard
	for j, u := range b {
		if u.H.sh != sh {
			if sh != nil {
				sh.mu.Unlock()
			}
			sh = u.H.sh
			sh.mu.Lock()
		}
		if r.reportLocked(u.H, res(j), sent, now, cause) {
			confirmed++
		}
	}
	if sh != nil {
		sh.mu.Unlock()
	}
	return confirmed
}

// reportLocked is ReportAll for one hold, h.sh.mu held.
func (r *Registry) reportLocked(h *Hold, res Renewal, sent, now time.Time, cause func(h *Hold) error) bool {
	h.inFlight = false
	switch {
	case h.gone || !h.watchdog:
	case res == Renewed:
		r.confirmLocked(h, sent, now, r.cfg.Watchdog)
		// A hold renewed early keeps its phase, within 5/4 of a period of
		// this send (renew.Timing.Next).
		h.sh.wheel.Put(h, r.timing.Next(sent, leaseclock.Time(h.renew.Due)), r.timing)
		return true
	case res == Gone:
		r.loseLocked(h, cause(h))
	default:
		h.sh.wheel.Put(h, now.Add(r.timing.Retry(h.lease.Valid.Sub(now))), r.timing)
	}
	return false
}
