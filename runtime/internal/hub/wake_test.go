package hub

import "testing"

// The hub's wake policy is memory only: these tests drive it without Redis,
// on a channel whose subscription is confirmed.

func newTestHub(t *testing.T, channel string) *Hub {
	t.Helper()
	h := New(Config{})
	sh := h.shard(channel)
	e := &entry{name: channel, sh: sh}
	e.readyGen = e.gen.Add(1)
	sh.entries[channel] = e
	h.nEntries.Add(1)
	t.Cleanup(func() {
		if e.linger != nil {
			e.linger.Stop()
		}
	})
	return h
}

func signalled(w *Waiter) bool {
	select {
	case <-w.c:
		return true
	default:
		return false
	}
}

func TestHubWakesOneWaiterPerUnlockInArrivalOrder(t *testing.T) {
	h := newTestHub(t, "ch")
	a, _ := h.Attach("ch", false, false)
	b, _ := h.Attach("ch", false, false)
	h.deliver("ch", UnlockMessage)
	if !signalled(a) || signalled(b) {
		t.Fatal("an unlock must wake the longest waiter, and only it")
	}
	h.Tried(a, false, false) // it tried and found the lock taken: the wake-up is spent
	h.deliver("ch", UnlockMessage)
	if signalled(b) == signalled(a) {
		t.Fatal("the second unlock must wake exactly one waiter")
	}
}

func TestHubHandsOnAWakeUpTheWaiterDidNotUse(t *testing.T) {
	h := newTestHub(t, "ch")
	a, _ := h.Attach("ch", false, false)
	b, _ := h.Attach("ch", false, false)
	h.deliver("ch", UnlockMessage)
	h.Leave(a, false) // gave up with the signal pending
	if !signalled(b) {
		t.Fatal("a wake-up left unused must go to the next waiter")
	}

	// Woken, took the signal, and gave up before its try ended.
	c, _ := h.Attach("ch", false, false)
	h.Tried(b, false, false)
	h.deliver("ch", UnlockMessage)
	if !signalled(b) {
		t.Fatal("b is the longest waiter")
	}
	h.Leave(b, false)
	if !signalled(c) {
		t.Fatal("a wake-up being used by a waiter that gives up must go on")
	}

	// One that acquired keeps it: nobody else is woken.
	h.Tried(c, false, false)
	d, _ := h.Attach("ch", false, false)
	h.deliver("ch", UnlockMessage)
	h.Leave(c, true)
	if signalled(d) {
		t.Fatal("the wake-up of a waiter that acquired must not be handed on")
	}
}

func TestHubLetsAHandoffInFlightFinishBeforeANewcomerTries(t *testing.T) {
	h := newTestHub(t, "ch")
	a, _ := h.Attach("ch", false, true)
	h.deliver("ch", UnlockMessage) // a is woken: a hand-off in flight
	n, deferred := h.Attach("ch", false, true)
	if !deferred {
		t.Fatal("a newcomer must wait for the hand-off in flight")
	}
	if signalled(n) {
		t.Fatal("released before the hand-off ended")
	}
	if !signalled(a) {
		t.Fatal("a not woken")
	}
	if !h.InFlight(n) {
		t.Fatal("the hand-off is in flight")
	}
	h.Tried(a, false, false) // a's try is over
	if !signalled(n) {
		t.Fatal("the newcomer must be released when the hand-off ends")
	}
	// With waiters but no hand-off in flight, a newcomer waits only for
	// an unlock message in transit (UnlockGrace).
	m, deferred := h.Attach("ch", false, true)
	if !deferred || h.InFlight(m) {
		t.Fatal("with waiters and no hand-off in flight a newcomer waits only the grace")
	}
	if _, deferred := h.Attach("ch", false, false); deferred {
		t.Fatal("only queueing kinds are deferred")
	}
	h2 := newTestHub(t, "other")
	if _, deferred := h2.Attach("other", false, true); deferred {
		t.Fatal("no waiter: a newcomer tries at once")
	}
}

func TestHubWriteUnlockWakesEveryReaderAndOneWriter(t *testing.T) {
	h := newTestHub(t, "ch")
	w1, _ := h.Attach("ch", false, false)
	r1, _ := h.Attach("ch", true, false)
	w2, _ := h.Attach("ch", false, false)
	r2, _ := h.Attach("ch", true, false)
	h.deliver("ch", ReadUnlockMessage)
	if !signalled(w1) || !signalled(r1) || !signalled(r2) || signalled(w2) {
		t.Fatal(`"1" must wake every reader and the first writer only`)
	}
}

func TestHubPassesOnAWakeUpAnotherWaiterGoesFirstOn(t *testing.T) {
	h := newTestHub(t, "ch")
	r1, _ := h.Attach("ch", true, false)
	r2, _ := h.Attach("ch", true, false)
	h.deliver("ch", UnlockMessage)
	if !signalled(r1) || signalled(r2) {
		t.Fatal("an unlock must wake the longest waiter only")
	}
	// r1's try found that another waiter (a writer elsewhere) goes first.
	h.Tried(r1, true, false)
	if !signalled(r2) {
		t.Fatal("a wake-up handed on must reach the next waiter")
	}
}

func newModeHub(t *testing.T, channel string, mode Mode) *Hub {
	t.Helper()
	h := newTestHub(t, channel)
	sh := h.shard(channel)
	sh.entries[channel].mode = mode
	return h
}

// attachN attaches n waiters to channel, longest waiting first.
func attachN(h *Hub, channel string, n int) []*Waiter {
	ws := make([]*Waiter, n)
	for i := range ws {
		ws[i], _ = h.Attach(channel, false, false)
	}
	return ws
}

func TestHubWakesAsManyWaitersAsPermitsCameFree(t *testing.T) {
	h := newModeHub(t, "sc", WakeCount)
	ws := attachN(h, "sc", 5)
	h.deliver("sc", "2")
	for i, w := range ws {
		if got, want := signalled(w), i < 2; got != want {
			t.Fatalf("waiter %d signalled = %v, want %v: 2 free permits wake the 2 longest waiters", i, got, want)
		}
	}
	h.Tried(ws[0], false, false)
	h.Tried(ws[1], false, false)
	h.deliver("sc", "not a number")
	if !signalled(ws[0]) || signalled(ws[2]) {
		t.Fatal("a payload that is not a count wakes one waiter")
	}
}

func TestHubLatchZeroWakesEveryWaiterAndOtherCountsNone(t *testing.T) {
	h := newModeHub(t, "cdl", WakeZero)
	ws := attachN(h, "cdl", 4)
	h.deliver("cdl", "1")
	for _, w := range ws {
		if signalled(w) {
			t.Fatal(`"1" (a new count) must wake no latch waiter`)
		}
	}
	h.deliver("cdl", "0")
	for i, w := range ws {
		if !signalled(w) {
			t.Fatalf(`waiter %d not woken by "0": the latch opened for everyone`, i)
		}
	}
}

// attachNeeding attaches one waiter per count in needs to channel, longest
// waiting first, each needing that many permits.
func attachNeeding(h *Hub, channel string, needs ...int) []*Waiter {
	ws := attachN(h, channel, len(needs))
	for i, n := range needs {
		h.Need(ws[i], n)
	}
	return ws
}

func TestHubCountWakeUpGoesPastWaitersNeedingMoreToOneItServes(t *testing.T) {
	h := newModeHub(t, "sc", WakeCount)
	ws := attachNeeding(h, "sc", 3, 2, 1, 1)
	h.deliver("sc", "1")
	if !signalled(ws[0]) || signalled(ws[1]) {
		t.Fatal(`"1" must wake the longest waiter only`)
	}
	h.Tried(ws[0], true, false) // needed more than 1: not its to use
	if signalled(ws[1]) || !signalled(ws[2]) {
		t.Fatal("the wake-up must go past the waiter needing 2 to the first needing 1")
	}
	h.Tried(ws[2], false, false) // took the permit
	h.Leave(ws[2], true)
	if signalled(ws[3]) || signalled(ws[0]) || signalled(ws[1]) {
		t.Fatal("a wake-up used must not go on")
	}
}

// The case a review found: "3" wakes three waiters; the two needing 1
// take 2, the one needing 3 fails, and the permit left goes on to the
// fourth, which needs 1 (it had stayed asleep with the permit free).
func TestHubCountWakeUpPassesOnWhatTheWokenLeft(t *testing.T) {
	h := newModeHub(t, "sc", WakeCount)
	ws := attachNeeding(h, "sc", 3, 1, 1, 1)
	h.deliver("sc", "3")
	for i := range 3 {
		if !signalled(ws[i]) {
			t.Fatalf(`"3" must wake waiter %d`, i)
		}
	}
	h.Tried(ws[1], false, false)
	h.Leave(ws[1], true)
	h.Tried(ws[2], false, false)
	h.Leave(ws[2], true)
	h.Tried(ws[0], true, false) // 1 left, it needs 3
	if !signalled(ws[3]) {
		t.Fatal("the permit left must go on to the waiter needing 1")
	}
}

func TestHubCountWakeUpTriesEachWaiterOncePerMessage(t *testing.T) {
	h := newModeHub(t, "sc", WakeCount)
	ws := attachNeeding(h, "sc", 1, 1, 1)
	h.deliver("sc", "1")
	signalled(ws[0])
	// Each found the permit taken (a newcomer, another process): the
	// wake-up goes down the line once, and stops.
	for i := range 2 {
		h.Tried(ws[i], true, false)
		if !signalled(ws[i+1]) {
			t.Fatalf("the wake-up must go to waiter %d", i+1)
		}
	}
	h.Tried(ws[2], true, false)
	for i := range ws {
		if signalled(ws[i]) {
			t.Fatalf("waiter %d, tried for this message, was woken for it again", i)
		}
	}
	h.deliver("sc", "2") // a new message: everyone may be woken again
	if !signalled(ws[0]) || !signalled(ws[1]) {
		t.Fatal(`"2" must wake two waiters`)
	}
}

func TestHubCountWakeUpGoesToNoWaiterNeedingMoreThanWasFree(t *testing.T) {
	h := newModeHub(t, "sc", WakeCount)
	ws := attachNeeding(h, "sc", 1, 2, 2)
	h.deliver("sc", "1")
	signalled(ws[0])
	h.Tried(ws[0], true, false) // the permit taken by someone else
	if signalled(ws[1]) || signalled(ws[2]) {
		t.Fatal("a wake-up for 1 permit must not go to waiters needing 2")
	}
}
