package hub

import (
	"testing"
	"time"
)

// The hub's bookkeeping without Redis: a hub without a client keeps its
// channel table (Join, aliases, lingering) and sends nothing; confirm
// stands for the server's confirmation of a subscription.

func memHub(t *testing.T) *Hub {
	t.Helper()
	h := New(Config{})
	t.Cleanup(h.Close)
	return h
}

func confirm(h *Hub, channel string) {
	sh, e := h.lock(channel)
	sh.mu.Unlock()
	h.confirmed(e, e.gen.Add(1))
}

// tried drains the wake-ups of ws and reports their tries as done.
func tried(h *Hub, ws ...*Waiter) {
	for _, w := range ws {
		signalled(w)
		h.Tried(w, false, false)
	}
}

// parked joins a waiter that can be handed the lock as field, and parks it.
func parked(t *testing.T, h *Hub, channel, field string) *Waiter {
	t.Helper()
	w, _ := h.Join(channel, false, Sub{})
	h.Grantee(w, func() (string, any) { return field, "30000" })
	h.Park(w)
	return w
}

func TestJoinIsReadyOnceTheSubscriptionIsConfirmed(t *testing.T) {
	h := memHub(t)
	if h.Active() || h.Offer("ch").Known {
		t.Fatal("an empty hub is active")
	}
	a, ready := h.Join("ch", false, Sub{})
	if ready || signalled(a) || h.Subscribed("ch", false) || !h.Offer("ch").Known {
		t.Fatal("a first join must subscribe and wait for the confirmation")
	}
	if w, _ := h.Attach("ch", false, true); w != nil {
		t.Fatal("attach before the confirmation: a message during its try could be missed")
	}
	confirm(h, "ch")
	if !signalled(a) {
		t.Fatal("the confirmation must wake the waiter: no message was missed from now on")
	}
	h.Tried(a, false, false)
	if _, ready := h.Join("ch", false, Sub{}); !ready {
		t.Fatal("a join on a confirmed channel must try again at once")
	}
	h.Close()
	if w, _ := h.Join("ch", false, Sub{}); w != nil {
		t.Fatal("join after Close")
	}
}

func TestOfferGoesToTheLongestParkedWaiterAndSettles(t *testing.T) {
	h := memHub(t)
	r, _ := h.Join("ch", true, Sub{}) // a reader: never offered an exclusive lock
	confirm(h, "ch")
	tried(h, r)
	a := parked(t, h, "ch", "owner:a")
	b := parked(t, h, "ch", "owner:b")
	h.Tried(a, false, true) // its try queued it in Redis
	o := h.Offer("ch")
	if !o.Made() || o.w != a || o.Field != "owner:a" || o.Px != "30000" || !o.Queued {
		t.Fatalf("offer went to %+v, want the longest parked waiter a", o)
	}
	if n, deferred := h.Attach("ch", false, true); !deferred || !h.InFlight(n) {
		t.Fatal("an offer in flight is a hand-off: a newcomer lets it finish")
	} else {
		h.Leave(n, false)
	}
	sent := time.Now()
	o.State, o.Marker, o.Sent = OfferGranted, "m1", sent
	done := make(chan OfferState)
	go func() {
		state, marker, at := h.Unpark(a) // waits for the outcome
		if marker != "m1" || !at.Equal(sent) {
			state = OfferNone
		}
		done <- state
	}()
	h.Settle(o)
	if got := <-done; got != OfferGranted {
		t.Fatalf("Unpark = %v, want the granted outcome with its marker and send time", got)
	}
	h.Tried(a, false, false)
	h.Leave(a, true)
	if signalled(b) {
		t.Fatal("a granted offer is used: no one else is woken")
	}
	if o := h.Offer("ch"); o.w != b {
		t.Fatal("b is next in line for offers")
	}
}

func TestAPublishedOfferLeavesTheWaiterAsleepAndFirstInLine(t *testing.T) {
	h := memHub(t)
	a := parked(t, h, "ch", "owner:a")
	confirm(h, "ch")
	tried(h, a)
	o := h.Offer("ch")
	o.State = OfferPublished // other listeners: the release published
	h.Settle(o)
	if signalled(a) {
		t.Fatal("a release that published must not wake its waiter from its reply")
	}
	if n, deferred := h.Attach("ch", false, true); !deferred || h.InFlight(n) {
		t.Fatal("the offer is over: no hand-off is in flight any more")
	} else {
		h.Leave(n, false)
	}
	h.deliver("ch", UnlockMessage) // the published message
	if !signalled(a) {
		t.Fatal("the unlock message wakes the longest waiter: a")
	}
	if state, _, _ := h.Unpark(a); state != OfferNone {
		t.Fatalf("Unpark = %v after a published release, want none", state)
	}
}

func TestHandOffsInARowAreBoundedUntilAMessage(t *testing.T) {
	h := memHub(t)
	a := parked(t, h, "ch", "owner:a")
	confirm(h, "ch")
	tried(h, a)
	for i := range HandoffStreak {
		o := h.Offer("ch")
		if !o.Made() {
			t.Fatalf("offer %d not made", i)
		}
		o.State = OfferGranted
		h.Settle(o)
		if !signalled(a) {
			t.Fatal("a granted offer must wake its waiter")
		}
		if state, _, _ := h.Unpark(a); state != OfferGranted {
			t.Fatal("not granted")
		}
		h.Tried(a, false, false)
		h.Park(a)
	}
	if h.Offer("ch").Made() {
		t.Fatalf("%d hand-offs in a row: the next release must publish", HandoffStreak)
	}
	h.deliver("ch", UnlockMessage)
	tried(h, a)
	if !h.Offer("ch").Made() {
		t.Fatal("a message ends the streak")
	}
}

func TestGrantOnTheCompanionChannelGoesToItsOwner(t *testing.T) {
	h := memHub(t)
	a, _ := h.Join("ch", false, Sub{Also: "ch:client"})
	h.Grantee(a, func() (string, any) { return "owner:a", "30000" })
	b, _ := h.Join("ch", false, Sub{})
	h.Grantee(b, func() (string, any) { return "owner:b", "30000" })
	confirm(h, "ch")
	tried(h, a, b)
	if !h.Subscribed("ch", true) || h.Subscribed("other", true) {
		t.Fatal("Grants must tell a channel subscribed with its companion")
	}
	h.Undefer(b) // b sleeps without a try of its own
	h.deliver("ch:client", GrantPrefix+"owner:b n7")
	if signalled(a) || !signalled(b) {
		t.Fatal("a grant wakes the waiter of the owner it names, only")
	}
	if state, nonce, _ := h.Unpark(b); state != OfferRemote || nonce != "n7" {
		t.Fatalf("Unpark = %v %q, want a remote grant for the try with nonce n7", state, nonce)
	}
	if w, deferred := h.Attach("ch", false, true); deferred {
		t.Fatal("other processes wait (a grant came): a newcomer tries, to queue in Redis")
	} else {
		h.Leave(w, false)
	}
	h.deliver("ch:client", "garbage")
	h.deliver("ch:client", GrantPrefix+"owner:nobody n8")
	if signalled(a) {
		t.Fatal("a grant to no waiter here wakes no one")
	}
}

func TestAFairGrantGoesToTheLongestWaiterThatCanTakeOne(t *testing.T) {
	h := memHub(t)
	a, _ := h.Join("fair", false, Sub{}) // a nested owner's: no grants
	b, _ := h.Join("fair", false, Sub{})
	h.Grantee(b, func() (string, any) { return "owner:b", nil })
	confirm(h, "fair")
	tried(h, a, b)
	h.deliver("fair", GrantPrefix+"n1")
	if signalled(a) || !signalled(b) {
		t.Fatal("the grant must go to b, the longest waiter that can take one")
	}
	if state, nonce, _ := h.Unpark(b); state != OfferRemote || nonce != "n1" {
		t.Fatalf("Unpark = %v %q", state, nonce)
	}
	h.Leave(b, true)
	h.deliver("fair", GrantPrefix+"n2")
	if !signalled(a) {
		t.Fatal("no waiter can take the grant: one is woken to try (its try takes it)")
	}
}

func TestRemoteWakesWaitersThatSleptWithoutATryOnlyOnceTheLockIsHeld(t *testing.T) {
	h := memHub(t)
	a, _ := h.Join("ch", false, Sub{})
	confirm(h, "ch")
	tried(h, a)
	n, deferred := h.Attach("ch", false, true)
	if !deferred {
		t.Fatal("a newcomer behind a waiter is deferred")
	}
	h.Undefer(n)
	h.Remote("ch", false)
	if signalled(n) {
		t.Fatal("other processes wait, but the lock may be free: the untried waiter keeps its place")
	}
	h.Remote("ch", true)
	if !signalled(n) {
		t.Fatal("granted elsewhere: the untried waiter must try now, to queue in Redis")
	}
}

func TestAWaiterThatTriedAndGivesUpWakesOneThatNeverTried(t *testing.T) {
	h := memHub(t)
	a, _ := h.Join("ch", false, Sub{})
	confirm(h, "ch")
	tried(h, a)
	n, _ := h.Attach("ch", false, true)
	h.Undefer(n)
	h.Leave(a, false)
	if !signalled(n) {
		t.Fatal("n slept on a's TTL: with a gone it must try")
	}
}

func TestADeadConnectionWakesEveryWaiterAndAGoneKeyOneWriter(t *testing.T) {
	h := memHub(t)
	w1, _ := h.Join("ch", false, Sub{Key: "k"})
	w2, _ := h.Join("ch", false, Sub{Key: "k"})
	r1, _ := h.Join("ch", true, Sub{Key: "k"})
	confirm(h, "ch")
	left, _ := h.Join("left", false, Sub{Key: "k"}) // a fair waiter's own channel, say
	confirm(h, "left")
	tried(h, w1, w2, r1, left)
	e, gone := w1.e, left.e
	h.Leave(left, true) // it took the lock: its channel lingers, without waiters
	wakeLongest([]*entry{gone, e})
	if !signalled(w1) || signalled(w2) || !signalled(r1) {
		t.Fatal("a gone key wakes as a write unlock: every reader and one writer, on the first channel with waiters")
	}
	for _, w := range []*Waiter{w1, r1} {
		h.Tried(w, false, false)
	}
	wakeEntries([]*entry{e})
	if !signalled(w1) || !signalled(w2) || !signalled(r1) {
		t.Fatal("a dead connection wakes every waiter")
	}
}

func TestTheLastLeaveLingersThenUnsubscribes(t *testing.T) {
	h := memHub(t)
	a, _ := h.Join("ch", false, Sub{Also: "ch:client"})
	confirm(h, "ch")
	e := a.e
	h.Leave(a, true)
	if !h.Offer("ch").Known || !h.Active() {
		t.Fatal("a channel stays subscribed a while after its last waiter")
	}
	h.expire(e) // the linger ran out
	if _, alias := h.aliases.Load("ch:client"); h.Offer("ch").Known || h.Active() || alias {
		t.Fatal("an expired channel is dropped with its companion")
	}
}

func TestIdleCountsParkedAndUngrantableWaiters(t *testing.T) {
	h := memHub(t)
	a := parked(t, h, "ch", "owner:a")
	b, _ := h.Join("ch", false, Sub{}) // cannot be handed the lock
	c, _ := h.Join("ch", false, Sub{})
	h.Grantee(c, func() (string, any) { return "owner:c", nil }) // grantable, not parked yet
	if h.Idle("ch", false) != 0 {
		t.Fatal("not confirmed: nobody is idle")
	}
	confirm(h, "ch") // every waiter is woken
	if h.Idle("ch", false) != 0 {
		t.Fatal("woken waiters are not idle")
	}
	for _, w := range []*Waiter{a, b, c} {
		<-w.c
		h.Tried(w, false, false)
	}
	if got := h.Idle("ch", true); got != 1 {
		t.Fatalf("parked = %d, want 1", got)
	}
	if got := h.Idle("ch", false); got != 2 {
		t.Fatalf("idle = %d, want 2 (a parked, b ungrantable)", got)
	}
}
