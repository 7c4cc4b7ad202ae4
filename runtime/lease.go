package runtime

import (
	"fmt"
	"time"
)

// The lease clock: the one place where a hold's deadline is kept and
// enforced (design.md §7).
//
// A hold's deadline is the send time of its last confirmed (P)EXPIRE plus
// that lease, minus drift; it is the max over every confirmation the hold
// had, so it only moves forward. Only a reply that proves the hold (an
// acquire that took or re-entered it, a renewal that found the owner's
// field) moves it, and the send time is read before the request leaves,
// so whatever the network did, Redis expires the key no earlier than the
// deadline plus drift.
//
// A timer that does no I/O ends the hold at its deadline: it takes the
// registry lock, and either finds the deadline moved (a confirmation came
// in meanwhile: it re-arms for the new one) or loses the hold, cancelling
// every ctx of it with ErrLockLost. No renewal round, retry, pool wait or
// socket read can delay that; renewals only report confirmations.

// confirmLocked records that a request sent at sent made Redis hold h for
// at least lease from then on. c.mu is held.
func (h *hold) confirmLocked(sent time.Time, lease time.Duration) {
	if h.gone {
		return
	}
	if end := sent.Add(lease); end.After(h.leaseEnd) {
		h.leaseEnd = end
	}
	valid := sent.Add(lease - drift(lease))
	if !valid.After(h.validUntil) {
		return
	}
	if h.timer != nil && !time.Now().Before(h.validUntil) {
		// The deadline has passed and the timer is about to end the hold:
		// a late confirmation never revives it (the ctx must be done by
		// the deadline, whatever arrives afterwards).
		return
	}
	h.validUntil = valid
	if h.timer == nil {
		h.timer = time.AfterFunc(time.Until(valid), h.expire)
	}
	// Otherwise the timer fires at the old deadline and re-arms itself for
	// this one: one timer operation per lease instead of one per renewal.
}

// expire is the hold's timer: it ends h if its deadline has passed.
func (h *hold) expire() {
	c := h.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if h.gone {
		return
	}
	if left := time.Until(h.validUntil); left > 0 {
		h.timer.Reset(left)
		return
	}
	why := "fixed lease ran out"
	if h.watchdog {
		why = "lease ran out without a confirmed renewal"
	}
	c.loseLocked(h, &LockError{Op: "renew", Name: h.name, Key: h.key, Err: fmt.Errorf("%w: %s", ErrLockLost, why)})
}

// stopLocked stops h's timer once h is gone. c.mu is held.
func (h *hold) stopLocked() {
	if h.timer != nil {
		h.timer.Stop()
	}
}

// leaseLeft is how long a request sent now must make Redis keep h so that
// no deadline h has counted on is cut short. c.mu is held.
func (h *hold) leaseLeft() time.Duration {
	return time.Until(h.leaseEnd)
}

// drift is the safety margin subtracted from a lease before the holder is
// told its hold may be gone: clocks of client and server run at slightly
// different rates, the expiry started when Redis ran the command (after it
// was sent), and the timer that ends the hold may fire a little late.
func drift(lease time.Duration) time.Duration {
	return lease/100 + 2*time.Millisecond
}
