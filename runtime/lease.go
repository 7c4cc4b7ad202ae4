package runtime

import (
	"fmt"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/leaseclock"
)

// The holds' side of the lease clock (package leaseclock): each registry
// shard keeps the queue of its own holds under its own mutex, so taking or
// releasing a lock takes no lock shared with unrelated keys, and one clock
// goroutine per Client ends the holds whose deadline passed.

// LeaseEntry places h on the lease clock.
func (h *hold) LeaseEntry() *leaseclock.Entry { return &h.lease }

// confirmLocked records that a request sent at sent made Redis hold h for
// at least lease from then on. h.sh.mu is held.
func (h *hold) confirmLocked(sent time.Time, lease time.Duration) {
	if h.gone || !h.lease.Confirm(sent, lease, time.Now()) {
		return
	}
	// The first confirmation puts h on the clock; later ones only move its
	// deadline, and the clock, reaching the old one, puts it back for the
	// new one: one clock operation per lease, not per renewal.
	c := h.c
	c.clock.Start((*clockedShards)(&c.reg), c.closeCh)
	if h.sh.due.Put(h) {
		c.clock.Due(h.lease.Valid)
	}
}

// stopLocked takes h off the clock once h is gone. h.sh.mu is held.
func (h *hold) stopLocked() { h.sh.due.Remove(h) }

// leaseLeft is how long a request sent now must make Redis keep h so that
// no deadline h has counted on is cut short. h.sh.mu is held.
func (h *hold) leaseLeft() time.Duration { return h.lease.Left(time.Now()) }

// clockedShards is the registry as the clock sees it.
type clockedShards registry

// Earliest is the earliest deadline of any shard (Unix ns), or
// leaseclock.None.
func (r *clockedShards) Earliest() int64 {
	m := int64(leaseclock.None)
	for i := range r.shards {
		m = min(m, r.shards[i].due.Head())
	}
	return m
}

// ExpireDue ends the holds whose deadline is past.
func (r *clockedShards) ExpireDue(now time.Time) {
	for i := range r.shards {
		if sh := &r.shards[i]; sh.due.Head() <= now.UnixNano() {
			sh.mu.Lock()
			sh.due.Expire(now, expire)
			sh.mu.Unlock()
		}
	}
}

// expire ends h at its deadline. h.sh.mu is held.
func expire(h *hold) {
	why := "fixed lease ran out"
	if h.watchdog {
		why = "lease ran out without a confirmed renewal"
	}
	h.c.loseLocked(h, &LockError{Op: "renew", Name: h.name, Key: h.key, Err: fmt.Errorf("%w: %s", ErrLockLost, why)})
	if h.watchdog {
		// Renewals sent since the last confirmed one may have reached
		// Redis and set a full lease there again.
		h.from.giveBackLost(h)
	}
}
