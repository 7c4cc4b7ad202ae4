package holds

import (
	"math"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/leaseclock"
	"github.com/lockgen/lockgen/runtime/internal/renew"
)

// The lease clock: each shard keeps a queue of its holds under its mutex;
// one clock goroutine per Registry ends those due.

// LeaseEntry places h on the lease clock.
func (h *Hold) LeaseEntry() *leaseclock.Entry { return &h.lease }

// confirmLocked records that a request sent at sent, its reply read at
// replied, made Redis keep h for at least lease. h.sh.mu is held.
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

// clocked is the registry as the clock sees it (leaseclock.Queues).
type clocked Registry

func (c *clocked) Earliest() int64 {
	m := int64(leaseclock.None)
	for i := range c.shards {
		m = min(m, c.shards[i].due.Head())
	}
	return m
}

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
	// A watchdog hold: renewals after the last confirmed one may have set
	// a lease again. A fixed one: another hold of the owner on the key (a
	// read hold beside its write hold, after a downgrade) keeps the key,
	// and h's field, alive; asked before h leaves (the walk is rare).
	giveBack := h.watchdog
	for id, o := range h.sh.holds {
		if giveBack {
			break
		}
		giveBack = o != h && id.Key == h.Key && o.Owner == h.Owner
	}
	r.loseLocked(h, r.cfg.Expired(h, why))
	if giveBack {
		h.From.GiveBackLost(h)
	}
}

// RenewEntry places h on its shard's renewal wheel.
func (h *Hold) RenewEntry() *renew.Entry { return &h.renew }

// A Due is a hold taken off the wheel for a renewal. Times are
// leaseclock.Nanos; Seq and Slot are copies, so sorting and batching read
// no hold.
type Due struct {
	H     *Hold
	At    int64    // when its renewal was due
	Extra []string // its extra keys
	// Valid is its deadline when taken: a call ends by the earliest of
	// its holds' (a confirmation only moves one later).
	Valid int64
	Seq   uint64
	Slot  int
}

// TakeDue appends to due the holds due by now (all: every watchdog hold),
// marked in flight; holds due in the next period/4 fill up the last batch
// of batch holds (renewing early costs nothing, a call for a handful of
// holds does).
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

// Earliest is when the oldest hold of batches was due (leaseclock.Nanos),
// and the earliest deadline of them, as taken.
func Earliest(batches [][]Due) (due int64, deadline time.Time) {
	due, valid := int64(math.MaxInt64), int64(math.MaxInt64)
	for _, b := range batches {
		for _, u := range b {
			due, valid = min(due, u.At), min(valid, u.Valid)
		}
	}
	return due, leaseclock.Time(valid)
}

// A Renewal is what one renewal found of a hold.
type Renewal int8

const (
	Unconfirmed Renewal = iota // no reply: try again soon
	Renewed                    // the key still holds the owner: extended
	Gone                       // the key no longer holds the owner
)

// ReportAll applies what the renewal of each hold of b, sent at sent, its
// reply read at now, found (res(j) for b[j]), and returns how many were
// confirmed. A hold gone is lost with cause(h); an unconfirmed one is
// tried again soon, its deadline where it was. It locks a shard once per
// run of its holds in b (TakeDue goes shard by shard).
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

// reportLocked is ReportAll for one hold. h.sh.mu is held.
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
