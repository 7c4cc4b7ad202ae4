package runtime

import "time"

// ParkedWaiters counts the goroutines of m's Client asleep on m's channel
// that a release could hand the lock to now (see hub.Offer: parked, no
// wake-up pending, the subscription confirmed): tests wait for it before
// they release.
func ParkedWaiters(m *Mutex) int { return m.c.hub.Idle(m.k.channel(m.key, ""), true) }

// IdleWaiters counts the goroutines of m's Client waiting for m with no
// wake-up pending or in use: ParkedWaiters for waiters a release may hand
// the lock to, and for the others (a nested owner's, or once hand-offs are
// off) every such waiter registered on the confirmed channel, asleep or
// about to be.
func IdleWaiters(m *Mutex) int { return m.c.hub.Idle(m.k.channel(m.key, ""), false) }

// StallRenewals makes c's watchdog see a renewal call in flight whose
// oldest hold was due long ago (as if Redis had not answered it): one
// worker slot is taken and marked so until the returned func is called.
// The loop's next tick closes the admission gate; a tick after release
// opens it again.
func StallRenewals(c *Client) (release func()) {
	w := &c.wd
	slot := <-w.workers
	w.busy[slot].Store(time.Now().Add(-2 * w.timing.CloseLag()).UnixNano())
	return func() {
		w.busy[slot].Store(0)
		w.workers <- slot
	}
}

// AdmissionClosed reports whether c's admission gate holds fresh
// acquisitions back.
func AdmissionClosed(c *Client) bool { return c.wd.gate.Closed() }
