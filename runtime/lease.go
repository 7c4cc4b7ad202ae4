package runtime

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
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
// at least lease from then on. h.sh.mu is held.
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

// stopLocked takes h off the clock once h is gone. h.sh.mu is held.
func (h *hold) stopLocked() {
	if h.clocked {
		h.clocked = false
		h.c.clock.remove(h)
	}
}

// leaseClock ends holds at their deadlines: one goroutine per Client over
// heaps of deadlines, so a hold costs no timer, no goroutine and no
// allocation of its own. Each registry shard keeps the heap of its own
// holds under its own mutex (so taking or releasing a lock takes no lock
// shared with unrelated keys) and publishes its earliest deadline in
// shard.dueHead; the goroutine sleeps until the earliest of those. A hold
// is on its shard's heap from its first confirmation until it is gone;
// its entry sits at the deadline it had when it was put there (clockAt),
// and is moved to a later one only when the clock reaches it: one heap
// operation per lease, not per renewal.
type leaseClock struct {
	once sync.Once
	// next is when the goroutine wakes next (Unix ns): a deadline put
	// before it wakes the goroutine early.
	next atomic.Int64
	wake chan struct{}
	done chan struct{}
}

// noDue is a shard head with nothing on its heap.
const noDue = math.MaxInt64

// clockHorizon is the longest the clock sleeps: it then reads the shards'
// heads again (512 atomic loads). Taking a lock whose deadline is further
// away than that never wakes it.
const clockHorizon = time.Second

// leaseHeap is a min-heap of holds by clockAt that knows each hold's
// index, so a released hold leaves it at once (it would otherwise keep the
// hold and its contexts alive until its deadline). It is written out
// rather than used through container/heap, whose interface boxes values.
type leaseHeap []*hold

func (q leaseHeap) less(i, j int) bool { return q[i].clockAt.Before(q[j].clockAt) }

func (q leaseHeap) swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].clockIdx, q[j].clockIdx = i, j
}

func (q leaseHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !q.less(i, p) {
			break
		}
		q.swap(i, p)
		i = p
	}
}

func (q leaseHeap) down(i int) {
	for {
		l, small := 2*i+1, i
		if l < len(q) && q.less(l, small) {
			small = l
		}
		if r := l + 1; r < len(q) && q.less(r, small) {
			small = r
		}
		if small == i {
			return
		}
		q.swap(i, small)
		i = small
	}
}

func (q *leaseHeap) push(h *hold) {
	h.clockIdx = len(*q)
	*q = append(*q, h)
	q.up(h.clockIdx)
}

// removeAt takes the entry at i off the heap.
func (q *leaseHeap) removeAt(i int) *hold {
	old := *q
	last := len(old) - 1
	h := old[i]
	if i != last {
		old.swap(i, last)
	}
	old[last] = nil
	*q = old[:last]
	if i != last {
		q.down(i)
		q.up(i)
	}
	h.clockIdx = -1
	return h
}

// add puts h on the clock for at. h.sh.mu is held.
func (lc *leaseClock) add(c *Client, h *hold, at time.Time) {
	lc.once.Do(func() {
		lc.wake = make(chan struct{}, 1)
		lc.done = make(chan struct{})
		lc.next.Store(noDue)
		go c.runClock()
	})
	sh := h.sh
	h.clockAt = at
	sh.due.push(h)
	if h.clockIdx != 0 {
		return
	}
	t := at.UnixNano()
	sh.dueHead.Store(t)
	// The goroutine reads the heads after it publishes next (runClock), so
	// a head it missed is one that sees its next here.
	for {
		next := lc.next.Load()
		if t >= next {
			return
		}
		if lc.next.CompareAndSwap(next, t) {
			break
		}
	}
	select {
	case lc.wake <- struct{}{}:
	default:
	}
}

// remove takes h off the clock. h.sh.mu is held.
func (lc *leaseClock) remove(h *hold) {
	sh := h.sh
	if h.clockIdx >= 0 && h.clockIdx < len(sh.due) && sh.due[h.clockIdx] == h {
		sh.due.removeAt(h.clockIdx)
		sh.publishDueHead() // later or none: the goroutine may wake for nothing once
	}
}

// publishDueHead stores the shard's earliest deadline in dueHead. sh.mu is
// held.
func (sh *shard) publishDueHead() {
	if len(sh.due) == 0 {
		sh.dueHead.Store(noDue)
		return
	}
	sh.dueHead.Store(sh.due[0].clockAt.UnixNano())
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
	for {
		now := time.Now().UnixNano()
		for i := range c.reg.shards {
			if sh := &c.reg.shards[i]; sh.dueHead.Load() <= now {
				c.expireDue(sh, time.Unix(0, now))
			}
		}
		// Publish next, then read the heads again: a deadline put in
		// between is seen here or sees the new next (and wakes us). The
		// clock looks again after clockHorizon in any case, so a hold put
		// on an empty clock (the common case: short holds come and go)
		// wakes it only if its deadline is nearer than that.
		next := min(c.reg.earliestDue(), now+int64(clockHorizon))
		lc.next.Store(next)
		if again := c.reg.earliestDue(); again < next {
			continue
		}
		sleep := time.Duration(next - time.Now().UnixNano())
		if sleep > 0 {
			timer.Reset(sleep)
			select {
			case <-timer.C:
			case <-lc.wake:
				timer.Stop()
			case <-c.closeCh:
				return
			}
		}
	}
}

// earliestDue is the earliest deadline of any shard (Unix ns), or noDue.
func (r *registry) earliestDue() int64 {
	m := int64(noDue)
	for i := range r.shards {
		m = min(m, r.shards[i].dueHead.Load())
	}
	return m
}

// expireDue ends the holds of sh whose deadline is now past, and moves the
// entries of holds confirmed since to their new deadline.
func (c *Client) expireDue(sh *shard, now time.Time) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for len(sh.due) > 0 && !sh.due[0].clockAt.After(now) {
		h := sh.due[0]
		if h.validUntil.After(now) {
			h.clockAt = h.validUntil // confirmed meanwhile
			sh.due.down(0)
			continue
		}
		sh.due.removeAt(0)
		h.clocked = false
		why := "fixed lease ran out"
		if h.watchdog {
			why = "lease ran out without a confirmed renewal"
		}
		c.loseLocked(h, &LockError{Op: "renew", Name: h.name, Key: h.key, Err: fmt.Errorf("%w: %s", ErrLockLost, why)})
		if h.watchdog {
			// Renewals sent since the last confirmed one may have
			// reached Redis and set a full lease there again.
			h.from.giveBackLost(h)
		}
	}
	sh.publishDueHead()
}

// leaseLeft is how long a request sent now must make Redis keep h so that
// no deadline h has counted on is cut short. h.sh.mu is held.
func (h *hold) leaseLeft() time.Duration {
	return time.Until(h.leaseEnd)
}

// drift is the safety margin subtracted from a lease before the holder is
// told its hold may be gone: clocks of client and server run at slightly
// different rates (Redisson's 1%), and the clock goroutine that ends the
// hold may run a few milliseconds late on a busy process (the fixed part:
// Redisson's 2 ms, raised to 5 as headroom for that).
func drift(lease time.Duration) time.Duration {
	return lease/100 + 5*time.Millisecond
}
