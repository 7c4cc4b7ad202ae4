package runtime

import (
	"fmt"
	"sync"
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
// A clock that does no I/O ends the hold at its deadline: it takes the
// registry lock, and either finds the deadline moved (a confirmation came
// in meanwhile: it puts the hold back for the new one) or loses the hold,
// cancelling every ctx of it with ErrLockLost. No renewal round, retry,
// pool wait or socket read can delay that; renewals only report
// confirmations.

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
	if h.clocked && !time.Now().Before(h.validUntil) {
		// The deadline has passed and the clock is about to end the hold:
		// a late confirmation never revives it (the ctx must be done by
		// the deadline, whatever arrives afterwards).
		return
	}
	h.validUntil = valid
	if !h.clocked {
		h.clocked = true
		h.c.clock.add(h.c, h, valid)
	}
	// Otherwise the clock reaches the old deadline first and puts h back
	// for the new one: one clock operation per lease, not per renewal.
}

// stopLocked takes h off the clock once h is gone. c.mu is held.
func (h *hold) stopLocked() {
	h.clocked = false // its entry is dropped when the clock reaches it
}

// leaseClock ends holds at their deadlines: one timer goroutine per
// Client over a heap of deadlines, so a hold costs no timer, no goroutine
// and no allocation of its own.
type leaseClock struct {
	once sync.Once
	mu   sync.Mutex // after Client.mu
	due  leaseHeap
	wake chan struct{}
	done chan struct{}
}

type leaseEntry struct {
	at time.Time
	h  *hold
}

// leaseHeap is a min-heap of deadlines. It is written out rather than
// used through container/heap, whose interface boxes every entry pushed:
// an allocation per hold on the lock's hot path.
type leaseHeap []leaseEntry

func (q *leaseHeap) push(e leaseEntry) {
	*q = append(*q, e)
	h := *q
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !h[i].at.Before(h[p].at) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (q *leaseHeap) pop() leaseEntry {
	h := *q
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h[last] = leaseEntry{}
	h = h[:last]
	for i := 0; ; {
		l, small := 2*i+1, i
		if l < len(h) && h[l].at.Before(h[small].at) {
			small = l
		}
		if r := l + 1; r < len(h) && h[r].at.Before(h[small].at) {
			small = r
		}
		if small == i {
			break
		}
		h[i], h[small] = h[small], h[i]
		i = small
	}
	*q = h
	return top
}

// add puts h on the clock for at. c.mu is held.
func (lc *leaseClock) add(c *Client, h *hold, at time.Time) {
	lc.once.Do(func() {
		lc.wake = make(chan struct{}, 1)
		lc.done = make(chan struct{})
		go c.runClock()
	})
	lc.mu.Lock()
	first := len(lc.due) == 0 || at.Before(lc.due[0].at)
	lc.due.push(leaseEntry{at, h})
	lc.mu.Unlock()
	if first {
		select {
		case lc.wake <- struct{}{}:
		default:
		}
	}
}

// wait blocks until the clock (if started) has stopped; c.closeCh is closed.
func (lc *leaseClock) wait() {
	lc.once.Do(func() {}) // no clock may start after this
	if lc.done != nil {
		<-lc.done
	}
}

// runClock is the clock's goroutine: it sleeps until the earliest deadline
// and ends every hold whose deadline has passed. It does no I/O.
func (c *Client) runClock() {
	lc := &c.clock
	defer close(lc.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var expired []*hold
	for {
		lc.mu.Lock()
		sleep := time.Hour
		if len(lc.due) > 0 {
			sleep = time.Until(lc.due[0].at)
		}
		lc.mu.Unlock()
		if sleep > 0 {
			timer.Reset(sleep)
			select {
			case <-timer.C:
			case <-lc.wake:
				timer.Stop()
				continue
			case <-c.closeCh:
				return
			}
		}
		now := time.Now()
		lc.mu.Lock()
		for len(lc.due) > 0 && !lc.due[0].at.After(now) {
			expired = append(expired, lc.due.pop().h)
		}
		lc.mu.Unlock()
		c.mu.Lock()
		for i, h := range expired {
			expired[i] = nil
			switch {
			case h.gone || !h.clocked:
			case h.validUntil.After(now):
				lc.mu.Lock()
				lc.due.push(leaseEntry{h.validUntil, h}) // confirmed meanwhile
				lc.mu.Unlock()
			default:
				why := "fixed lease ran out"
				if h.watchdog {
					why = "lease ran out without a confirmed renewal"
				}
				c.loseLocked(h, &LockError{Op: "renew", Name: h.name, Key: h.key, Err: fmt.Errorf("%w: %s", ErrLockLost, why)})
			}
		}
		c.mu.Unlock()
		expired = expired[:0]
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
