package runtime

// ParkedWaiters counts the goroutines of m's Client asleep on m's channel
// that a release could hand the lock to now (see hub.offer: parked, no
// wake-up pending, the subscription confirmed): tests wait for it before
// they release.
func ParkedWaiters(m *Mutex) int {
	return countWaiters(m, func(w *waiter) bool { return w.parked })
}

// IdleWaiters counts the goroutines of m's Client waiting for m with no
// wake-up pending or in use: ParkedWaiters for waiters a release may hand
// the lock to, and for the others (a nested owner's, or once hand-offs are
// off) every such waiter registered on the confirmed channel, asleep or
// about to be.
func IdleWaiters(m *Mutex) int {
	return countWaiters(m, func(w *waiter) bool { return w.parked || w.grantField == "" })
}

// countWaiters counts the waiters on m's confirmed channel with no wake-up
// pending or in use for which also holds.
func countWaiters(m *Mutex, also func(*waiter) bool) int {
	h := m.c.hub
	channel := m.k.channel(m.key, "")
	sh := h.shard(channel)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.entries[channel]
	if e == nil || !e.ready() {
		return 0
	}
	n := 0
	for _, w := range e.waiters {
		if !w.woken && len(w.C) == 0 && also(w) {
			n++
		}
	}
	return n
}
