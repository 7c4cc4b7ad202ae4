package runtime

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// The hub is where waiters sleep. Waiters join a channel (ref-counted: the
// first joiner subscribes) and wait on their own signal; the hub's receive
// loops turn messages into signals in memory:
//
//   - "0" (unlock) wakes one waiter, the longest waiting, so an unlock never
//     starts a thundering herd;
//   - "1" (write unlock) wakes every waiting reader and one other waiter;
//   - a subscription confirmation wakes every waiter of the channel: on the
//     first subscription it tells them to try again now that no unlock can
//     be missed; after a reconnect it makes up for messages published while
//     the connection was down.
//
// A waiter that leaves with an unconsumed signal passes it to the next
// waiter when it gave up, and drops it when it acquired, so no wake-up is
// lost and none is wasted.
//
// With classic pub/sub the hub has one connection. With sharded pub/sub
// (Redis Cluster >= 7) a channel can only be subscribed on the node that
// owns its slot, so the hub keeps one connection per slot in use, closes it
// when its last channel goes, and moves a slot's channels to a new
// connection when the server drops them (slot migration).
type hub struct {
	c *Client

	mu      sync.Mutex
	conns   map[int]*subConn // by slot (sharded), or the one at 0 (classic)
	entries map[string]*channelEntry
	closed  bool
	loops   sync.WaitGroup // receive loops, including those of dropped connections
}

// subConn is one pub/sub connection and its receive loop.
type subConn struct {
	slot int
	ps   *redis.PubSub
	// pending lists, per channel, the entries whose subscribe awaits its
	// confirmation, in the order sent. A confirmation with nothing pending
	// comes from go-redis resubscribing after a reconnect.
	pending map[string][]*channelEntry
	// unsubscribing counts, per channel, the unsubscribes sent and not yet
	// confirmed; any other unsubscribe comes from the server.
	unsubscribing map[string]int
	users         int  // entries subscribed through it
	dead          bool // closed or replaced
}

type channelEntry struct {
	name      string
	conn      *subConn
	waiters   []*waiter
	ready     bool        // subscription confirmed
	linger    *time.Timer // pending unsubscribe once no one waits
	busyUntil time.Time   // latest end of the holder's lease a waiter saw
}

// A waiter is one goroutine waiting for a lock.
type waiter struct {
	C      chan struct{} // receives a signal when the lock may be free
	e      *channelEntry
	shared bool // a reader: woken with every other reader
}

const (
	// subscriptionLinger keeps a channel subscribed a little after its last
	// waiter left: under steady contention waiters come and go all the
	// time, and re-subscribing for each would double the traffic.
	subscriptionLinger = 250 * time.Millisecond
	// hubPingInterval is how long a receive loop waits for a message
	// before it pings, to find a dead connection.
	hubPingInterval = 15 * time.Second
)

func newHub(c *Client) *hub {
	return &hub{
		c:       c,
		conns:   make(map[int]*subConn),
		entries: make(map[string]*channelEntry),
	}
}

// join registers a waiter on channel, subscribing if nobody else waits on
// it. ready reports whether the subscription is already confirmed: if so
// the caller tries at once, otherwise it first waits for a signal (the
// confirmation) or its sleep bound.
func (h *hub) join(channel string, shared bool) (w *waiter, ready bool, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, false, ErrClosed
	}
	e := h.entries[channel]
	if e == nil {
		e = &channelEntry{name: channel}
		h.entries[channel] = e
		h.subscribeLocked(e)
	} else if e.linger != nil {
		e.linger.Stop()
		e.linger = nil
	}
	w = &waiter{C: make(chan struct{}, 1), e: e, shared: shared}
	e.waiters = append(e.waiters, w)
	return w, e.ready, nil
}

// queue registers a waiter on channel behind the waiters already there,
// if the subscription is confirmed and someone waits: a newcomer then need
// not try first, since the lock is busy or about to be taken by the
// woken head, and waits its turn instead of barging in. The sleep bound is
// what the waiters last saw of the holder's lease. ok is false when the
// caller should take the usual path (try first).
func (h *hub) queue(channel string, shared bool) (w *waiter, bound time.Duration, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e := h.entries[channel]
	if h.closed || e == nil || !e.ready || len(e.waiters) == 0 {
		return nil, 0, false
	}
	bound = time.Until(e.busyUntil)
	if bound <= 0 {
		return nil, 0, false
	}
	w = &waiter{C: make(chan struct{}, 1), e: e, shared: shared}
	e.waiters = append(e.waiters, w)
	return w, bound, true
}

// busy records that w saw the lock held for ttl more.
func (h *hub) busy(w *waiter, ttl time.Duration) {
	if ttl < 0 {
		ttl = time.Hour // no expiry: bounded by the waiters' own limits
	}
	until := time.Now().Add(ttl)
	h.mu.Lock()
	if until.After(w.e.busyUntil) {
		w.e.busyUntil = until
	}
	h.mu.Unlock()
}

// leave unregisters w. acquired says whether the waiter got the lock; if it
// did not and holds an unconsumed signal, the signal goes to the next waiter.
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
	select {
	case <-w.C:
		if !acquired {
			wakeOne(e, nil)
		}
	default:
	}
	if len(e.waiters) == 0 && h.entries[e.name] == e && !h.closed {
		e.linger = time.AfterFunc(subscriptionLinger, func() { h.expire(e) })
	}
}

// wake signals one more waiter on channel: a waiter that was woken but
// could not use the wake-up (its try failed, or a multi-lock is blocked on
// another member) hands the unlock on.
func (h *hub) wake(channel string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e := h.entries[channel]; e != nil {
		wakeOne(e, nil)
	}
}

// passOn signals one waiter of w's channel other than w: w was woken but
// another waiter goes first.
func (h *hub) passOn(w *waiter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	wakeOne(w.e, w)
}

// expire unsubscribes e if still nobody waits on it.
func (h *hub) expire(e *channelEntry) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || h.entries[e.name] != e || len(e.waiters) > 0 {
		return
	}
	delete(h.entries, e.name)
	sc := e.conn
	if sc == nil || sc.dead {
		return
	}
	sc.users--
	if h.c.sharded && sc.users == 0 {
		h.dropConnLocked(sc)
		return
	}
	sc.unsubscribing[e.name]++
	ctx, cancel := context.WithTimeout(context.Background(), h.c.opts.ReleaseTimeout)
	defer cancel()
	var err error
	if h.c.sharded {
		err = sc.ps.SUnsubscribe(ctx, e.name)
	} else {
		err = sc.ps.Unsubscribe(ctx, e.name)
	}
	if err != nil {
		h.c.log.Debug("unsubscribe failed", "channel", e.name, "err", err)
	}
}

// subscribeLocked subscribes e on the connection for its slot.
func (h *hub) subscribeLocked(e *channelEntry) {
	slot := 0
	if h.c.sharded {
		slot = keySlot(e.name)
	}
	sc := h.conns[slot]
	fresh := sc == nil
	if fresh {
		sc = &subConn{
			slot:          slot,
			pending:       make(map[string][]*channelEntry),
			unsubscribing: make(map[string]int),
		}
		// An empty subscription does not connect yet; the first subscribe
		// (below) dials, on a cluster the node that owns the channel's slot.
		if h.c.sharded {
			sc.ps = h.c.rdb.SSubscribe(context.Background())
		} else {
			sc.ps = h.c.rdb.Subscribe(context.Background())
		}
		h.conns[slot] = sc
	}
	e.conn = sc
	e.ready = false
	sc.users++
	ctx, cancel := context.WithTimeout(context.Background(), h.c.opts.ReleaseTimeout)
	defer cancel()
	var err error
	if h.c.sharded {
		err = sc.ps.SSubscribe(ctx, e.name)
	} else {
		err = sc.ps.Subscribe(ctx, e.name)
	}
	if fresh {
		// The receive loop starts only now: a receive on a subscription
		// with no channel yet dials a random cluster node, where the
		// sharded subscribe that follows would be refused (MOVED) and never
		// confirmed. Now the connection is the slot's, or (after an error)
		// go-redis dials it for the channel it keeps in its set.
		h.loops.Add(1)
		go h.loop(sc)
	}
	if err != nil {
		// go-redis keeps the channel in its set and subscribes it again
		// when the connection comes back; that confirmation marks e ready.
		// Until then waiters are bounded by the holder's lease.
		h.c.log.Debug("subscribe failed", "channel", e.name, "err", err)
		return
	}
	sc.pending[e.name] = append(sc.pending[e.name], e)
}

// dropConnLocked closes sc; its loop ends on its own.
func (h *hub) dropConnLocked(sc *subConn) {
	sc.dead = true
	if h.conns[sc.slot] == sc {
		delete(h.conns, sc.slot)
	}
	go func() { _ = sc.ps.Close() }()
}

// confirmed handles a subscription confirmation for channel on sc.
func (h *hub) confirmed(sc *subConn, channel string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if q := sc.pending[channel]; len(q) > 0 {
		if len(q) == 1 {
			delete(sc.pending, channel)
		} else {
			sc.pending[channel] = q[1:]
		}
	}
	if e := h.entries[channel]; e != nil && e.conn == sc {
		e.ready = true
		wakeAll(e)
	}
}

// unsubscribed handles an unsubscribe notice for channel on sc. One the
// hub did not ask for means the server dropped the channel (its slot moved
// to another node): every channel of sc moves to a new connection, which
// go-redis dials to the slot's new owner.
func (h *hub) unsubscribed(sc *subConn, channel string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if sc.unsubscribing[channel] > 0 {
		sc.unsubscribing[channel]--
		if sc.unsubscribing[channel] == 0 {
			delete(sc.unsubscribing, channel)
		}
		return
	}
	if sc.dead || h.closed {
		return
	}
	h.dropConnLocked(sc)
	for _, e := range h.entries {
		if e.conn == sc {
			h.subscribeLocked(e)
			wakeAll(e) // try now: an unlock may have been missed meanwhile
		}
	}
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
		select {
		case w.C <- struct{}{}:
		default:
		}
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
			select {
			case w.C <- struct{}{}:
				return
			default:
			}
		}
	}
}

func wakeAll(e *channelEntry) {
	for _, w := range e.waiters {
		select {
		case w.C <- struct{}{}:
		default:
		}
	}
}

func (h *hub) loop(sc *subConn) {
	defer h.loops.Done()
	ctx := context.Background()
	backoff := time.Duration(0)
	for {
		msg, err := sc.ps.ReceiveTimeout(ctx, hubPingInterval)
		if err != nil {
			if h.connDead(sc) {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				_ = sc.ps.Ping(ctx)
				continue
			}
			// Connection lost: go-redis reconnects and resubscribes on the
			// next receive; back off while the server is unreachable.
			backoff = min(max(2*backoff, 20*time.Millisecond), time.Second)
			select {
			case <-time.After(backoff):
			case <-h.c.closeCh:
				return
			}
			continue
		}
		backoff = 0
		switch m := msg.(type) {
		case *redis.Subscription:
			switch m.Kind {
			case "subscribe", "ssubscribe":
				h.confirmed(sc, m.Channel)
			case "unsubscribe", "sunsubscribe":
				h.unsubscribed(sc, m.Channel)
			}
		case *redis.Message:
			h.deliver(m.Channel, m.Payload)
		}
	}
}

func (h *hub) connDead(sc *subConn) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closed || sc.dead
}

// close stops the receive loops and closes the pub/sub connections.
func (h *hub) close() {
	h.mu.Lock()
	h.closed = true
	for _, e := range h.entries {
		if e.linger != nil {
			e.linger.Stop()
		}
	}
	conns := make([]*subConn, 0, len(h.conns))
	for _, sc := range h.conns {
		sc.dead = true
		conns = append(conns, sc)
	}
	h.mu.Unlock()
	for _, sc := range conns {
		_ = sc.ps.Close()
	}
	h.loops.Wait()
}
