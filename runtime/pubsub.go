package runtime

import (
	"sync"
	"sync/atomic"
	"time"
)

// The hub is where waiters sleep. Waiters join a channel (ref-counted: the
// first joiner subscribes) and wait on their own signal; messages become
// signals in memory:
//
//   - "0" (unlock) wakes one waiter, the longest waiting, so an unlock never
//     starts a thundering herd;
//   - "1" (write unlock) wakes every waiting reader and one other waiter;
//   - a subscription confirmation wakes every waiter of the channel: on the
//     first subscription it tells them to try again now that no unlock can
//     be missed; on a replacement connection it makes up for messages
//     published while the old one was dead;
//   - a connection found dead (see hub_conn.go) wakes every waiter of its
//     channels at once, for the same reason.
//
// A waiter that leaves with a wake-up it has not used up (the signal is
// pending, or it was woken and has not finished the try that followed)
// passes it to the next waiter when it gave up, and drops it when it
// acquired, so no wake-up is lost and none is wasted.
//
// This file is the memory side: the channel table, the waiters and the
// wake policy, under h.mu, which guards no I/O. The connections, their
// (un)subscribe I/O and their health live in hub_conn.go; they report
// what they read through the methods here.
//
// In-process FIFO: a newcomer on a channel where this client has waiters
// lets a hand-off go first, so a goroutine that just unlocked and locks
// again does not take the lock from the waiter its unlock is waking. If a
// woken waiter is still trying (a hand-off in flight), the newcomer's
// first try waits until that try is over (at most hubHandoffWait); if
// none is, it waits hubUnlockGrace for an unlock message that may be on
// its way (the releaser's reply and the message to the hub leave Redis
// together, and the releaser is often first), and longer only if that
// message starts a hand-off. It is never a sleep on what someone else saw
// of the lock: every waiter tries before it sleeps on a TTL, and sleeps
// no longer than the holder's TTL its own latest try returned (see
// await); a lock that became free without a message costs a newcomer at
// most hubUnlockGrace.
type hub struct {
	c *Client

	mu      sync.Mutex
	conns   map[int]*subConn // by slot (sharded), or the one at 0 (classic)
	entries map[string]*channelEntry
	closed  bool
	monitor chan struct{} // closed by close: ends the health monitor (nil until the first connection)

	nEntries atomic.Int32 // len(entries), read without the lock by the uncontended path
	wg       sync.WaitGroup
}

type channelEntry struct {
	name    string
	conn    *subConn // the connection it is (being) subscribed on
	waiters []*waiter
	ready   bool        // subscription confirmed on conn
	linger  *time.Timer // pending unsubscribe once no one waits
	// inflight counts the waiters that were woken and have not finished
	// the try that followed: a hand-off in flight (see hub).
	inflight int
}

// A waiter is one goroutine waiting for a lock.
type waiter struct {
	C      chan struct{} // receives a signal when the lock may be free
	e      *channelEntry
	shared bool // a reader: woken with every other reader
	// woken: signalled by the hub and not yet done with the try that
	// followed (counted in e.inflight).
	woken bool
	// deferred: a newcomer letting a hand-off in flight finish before its
	// first try; signalled when e.inflight drops to 0.
	deferred bool
}

const (
	// subscriptionLinger keeps a channel subscribed a little after its last
	// waiter left: under steady contention waiters come and go all the
	// time, and re-subscribing for each would double the traffic.
	subscriptionLinger = 250 * time.Millisecond
	// hubHandoffWait bounds how long a newcomer lets a hand-off in flight
	// (a woken waiter's try, one round trip) finish before its own try.
	hubHandoffWait = 50 * time.Millisecond
	// hubUnlockGrace is how long a newcomer waits for an unlock message
	// that may be in transit before its first try, when this client has
	// waiters on the lock but none is woken: a message takes well under a
	// millisecond from Redis to the hub on a healthy link.
	hubUnlockGrace = 2 * time.Millisecond
)

func newHub(c *Client) *hub {
	return &hub{
		c:       c,
		conns:   make(map[int]*subConn),
		entries: make(map[string]*channelEntry),
	}
}

// active reports whether any channel is subscribed or being subscribed:
// when none is, no waiter can attach before its first try, and the
// uncontended path skips the hub.
func (h *hub) active() bool { return h.nEntries.Load() > 0 }

// attach registers a waiter on channel before its first try, if the
// channel's subscription is confirmed: a wake-up published during that try
// then reaches it, so it need not try a second time after joining. With
// fifo, a newcomer that finds a hand-off in flight is deferred: it should
// wait on w.C before trying (see hub and await). w is nil when the
// channel is not subscribed yet (the caller tries, then joins).
func (h *hub) attach(channel string, shared, fifo bool) (w *waiter, deferred bool) {
	nw := &waiter{C: make(chan struct{}, 1), shared: shared}
	h.mu.Lock()
	defer h.mu.Unlock()
	e := h.entries[channel]
	if h.closed || e == nil || !e.ready {
		return nil, false
	}
	others := len(e.waiters)
	h.addLocked(e, nw)
	if fifo && (e.inflight > 0 || others > 0) {
		nw.deferred = true
	}
	return nw, nw.deferred
}

// handoffInFlight reports whether w is still deferred behind a hand-off in
// flight (its grace for an unlock message in transit is over).
func (h *hub) handoffInFlight(w *waiter) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return w.deferred && w.e.inflight > 0
}

// join registers a waiter on channel, subscribing if nobody else waits on
// it (the subscribe itself runs on the connection's goroutine, never
// here). ready reports whether the subscription is already confirmed: if
// so, a wake-up published since the caller's last try may have gone to
// nobody, and the caller tries again at once; otherwise the confirmation
// wakes it.
func (h *hub) join(channel string, shared bool) (w *waiter, ready bool, err error) {
	w = &waiter{C: make(chan struct{}, 1), shared: shared}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, false, ErrClosed
	}
	e := h.entries[channel]
	if e == nil {
		e = &channelEntry{name: channel}
		h.entries[channel] = e
		h.nEntries.Add(1)
		h.subscribeLocked(e)
	}
	h.addLocked(e, w)
	return w, e.ready, nil
}

func (h *hub) addLocked(e *channelEntry, w *waiter) {
	if e.linger != nil {
		e.linger.Stop()
	}
	w.e = e
	e.waiters = append(e.waiters, w)
}

// tried tells the hub that w finished a try. A wake-up it used is spent,
// unless handOn: then w was woken but another waiter goes first (a reader
// behind a waiting writer), and the wake-up goes to the next waiter. A
// signal still pending in w.C came after the try started: w will use it
// on its next wait.
func (h *hub) tried(w *waiter, handOn bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	w.deferred = false
	if !w.woken || len(w.C) > 0 {
		return
	}
	e := w.e
	h.spentLocked(w)
	if handOn {
		wakeOne(e, w)
	}
}

// spentLocked ends w's hand-off and lets deferred newcomers try once no
// hand-off is in flight.
func (h *hub) spentLocked(w *waiter) {
	e := w.e
	w.woken = false
	e.inflight--
	if e.inflight > 0 {
		return
	}
	for _, x := range e.waiters {
		if x.deferred {
			x.deferred = false
			select {
			case x.C <- struct{}{}:
			default:
			}
		}
	}
}

// leave unregisters w. acquired says whether the waiter got the lock; if it
// did not and has a wake-up it did not use up, the wake-up goes to the
// next waiter.
func (h *hub) leave(w *waiter, acquired bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e := w.e
	for i, x := range e.waiters {
		if x == w {
			e.waiters = append(e.waiters[:i], e.waiters[i+1:]...)
			break
		}
	}
	unused := false
	select {
	case <-w.C:
		unused = true
	default:
	}
	if w.woken {
		unused = true
		h.spentLocked(w)
	}
	if unused && !acquired {
		wakeOne(e, nil)
	}
	if len(e.waiters) == 0 && h.entries[e.name] == e && !h.closed {
		if e.linger == nil {
			e.linger = time.AfterFunc(subscriptionLinger, func() { h.expire(e) })
		} else {
			e.linger.Reset(subscriptionLinger)
		}
	}
}

// wake signals one more waiter on channel: a multi-lock waiter that was
// woken on one member's channel but is now blocked by another hands the
// unlock on.
func (h *hub) wake(channel string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e := h.entries[channel]; e != nil {
		wakeOne(e, nil)
	}
}

// expire unsubscribes e if still nobody waits on it.
func (h *hub) expire(e *channelEntry) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || h.entries[e.name] != e || len(e.waiters) > 0 {
		return
	}
	delete(h.entries, e.name)
	h.nEntries.Add(-1)
	h.unsubscribeLocked(e)
}

// deliver handles a message published on channel.
func (h *hub) deliver(channel, payload string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e := h.entries[channel]
	if e == nil {
		return
	}
	if payload == readUnlockMessage {
		wakeReaders(e)
		return
	}
	wakeOne(e, nil)
}

// signal sends w a wake-up unless one is pending; it reports whether it did.
func signal(e *channelEntry, w *waiter) bool {
	select {
	case w.C <- struct{}{}:
	default:
		return false
	}
	w.deferred = false
	if !w.woken {
		w.woken = true
		e.inflight++
	}
	return true
}

// wakeReaders signals every reader and the longest-waiting other waiter:
// the readers can all go together; of the writers only one can.
func wakeReaders(e *channelEntry) {
	writer := false
	for _, w := range e.waiters {
		if !w.shared {
			if writer {
				continue
			}
			writer = true
		}
		signal(e, w)
	}
}

// wakeOne signals the longest-waiting waiter (other than skip) that has no
// signal pending, an exclusive one (a writer) before a reader: a read
// unlock that frees the lock matters to a writer; readers were not
// blocked by readers.
func wakeOne(e *channelEntry, skip *waiter) {
	for _, exclusive := range []bool{true, false} {
		for _, w := range e.waiters {
			if w == skip || w.shared == exclusive {
				continue
			}
			if signal(e, w) {
				return
			}
		}
	}
}

func wakeAll(e *channelEntry) {
	for _, w := range e.waiters {
		signal(e, w)
	}
}
