package runtime

// ParkedWaiters counts the goroutines of m's Client asleep on m's channel
// that a release could hand the lock to now (see hub.offer: parked, no
// wake-up pending, the subscription confirmed): tests wait for it before
// they release.
func ParkedWaiters(m *Mutex) int {
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
		if w.parked && !w.woken && len(w.C) == 0 {
			n++
		}
	}
	return n
}
