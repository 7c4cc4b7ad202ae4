package runtime

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// The hub is the one pub/sub connection of a Client. Waiters join a channel
// (ref-counted: the first joiner subscribes) and sleep on their own signal;
// the hub's receive loop turns messages into signals in memory:
//
//   - "0" (unlock) wakes one waiter, the longest waiting, so an unlock never
//     starts a thundering herd;
//   - "1" (read unlock) wakes every waiter;
//   - a subscription confirmation wakes every waiter of the channel: on the
//     first subscription it tells them to try again now that no unlock can
//     be missed; after a reconnect it makes up for messages published while
//     the connection was down.
//
// A waiter that leaves with an unconsumed signal (it gave up, or it
// acquired by its own try) passes nothing on when it acquired, and passes
// the signal to the next waiter when it gave up, so no wake-up is lost.
type hub struct {
	c *Client

	mu      sync.Mutex
	ps      *redis.PubSub
	entries map[string]*channelEntry
	// pending lists, per channel, the entries whose SUBSCRIBE awaits its
	// confirmation, in the order sent. A confirmation with nothing pending
	// comes from go-redis resubscribing after a reconnect.
	pending  map[string][]*channelEntry
	closed   bool
	loopDone chan struct{}
}

type channelEntry struct {
	name    string
	waiters []*waiter
	ready   bool        // subscription confirmed
	linger  *time.Timer // pending unsubscribe once no one waits
}

// A waiter is one goroutine waiting for a lock.
type waiter struct {
	C chan struct{} // receives a signal when the lock may be free
	e *channelEntry
}

const (
	// subscriptionLinger keeps a channel subscribed a little after its last
	// waiter left: under steady contention waiters come and go all the
	// time, and re-subscribing for each would double the traffic.
	subscriptionLinger = 250 * time.Millisecond
	// hubPingInterval is how long the receive loop waits for a message
	// before it pings, to find a dead connection.
	hubPingInterval = 15 * time.Second
)

func newHub(c *Client) *hub {
	return &hub{
		c:       c,
		entries: make(map[string]*channelEntry),
		pending: make(map[string][]*channelEntry),
	}
}

// join registers a waiter on channel, subscribing if nobody else waits on
// it. ready reports whether the subscription is already confirmed: if so
// the caller tries at once, otherwise it first waits for a signal (the
// confirmation) or its sleep bound.
func (h *hub) join(channel string) (w *waiter, ready bool, err error) {
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
	w = &waiter{C: make(chan struct{}, 1), e: e}
	e.waiters = append(e.waiters, w)
	return w, e.ready, nil
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
			wakeOne(e)
		}
	default:
	}
	if len(e.waiters) == 0 && h.entries[e.name] == e && !h.closed {
		e.linger = time.AfterFunc(subscriptionLinger, func() { h.expire(e) })
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
	ctx, cancel := context.WithTimeout(context.Background(), h.c.opts.ReleaseTimeout)
	defer cancel()
	if err := h.ps.Unsubscribe(ctx, e.name); err != nil {
		h.c.log.Debug("unsubscribe failed", "channel", e.name, "err", err)
	}
}

func (h *hub) subscribeLocked(e *channelEntry) {
	if h.ps == nil {
		h.ps = h.c.rdb.Subscribe(context.Background())
		h.loopDone = make(chan struct{})
		go h.loop(h.ps)
	}
	ctx, cancel := context.WithTimeout(context.Background(), h.c.opts.ReleaseTimeout)
	defer cancel()
	if err := h.ps.Subscribe(ctx, e.name); err != nil {
		// go-redis keeps the channel in its set and subscribes it again
		// when the connection comes back; that confirmation marks e ready.
		// Until then waiters are bounded by the holder's lease.
		h.c.log.Debug("subscribe failed", "channel", e.name, "err", err)
		return
	}
	h.pending[e.name] = append(h.pending[e.name], e)
}

// confirmed handles a subscription confirmation for channel.
func (h *hub) confirmed(channel string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if q := h.pending[channel]; len(q) > 0 {
		if len(q) == 1 {
			delete(h.pending, channel)
		} else {
			h.pending[channel] = q[1:]
		}
	}
	if e := h.entries[channel]; e != nil {
		e.ready = true
		wakeAll(e)
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
		wakeAll(e)
		return
	}
	wakeOne(e)
}

// wakeOne signals the longest-waiting waiter that has no signal pending.
func wakeOne(e *channelEntry) {
	for _, w := range e.waiters {
		select {
		case w.C <- struct{}{}:
			return
		default:
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

func (h *hub) loop(ps *redis.PubSub) {
	defer close(h.loopDone)
	ctx := context.Background()
	backoff := time.Duration(0)
	for {
		msg, err := ps.ReceiveTimeout(ctx, hubPingInterval)
		if err != nil {
			if h.isClosed() {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				_ = ps.Ping(ctx)
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
			if m.Kind == "subscribe" || m.Kind == "ssubscribe" {
				h.confirmed(m.Channel)
			}
		case *redis.Message:
			h.deliver(m.Channel, m.Payload)
		}
	}
}

func (h *hub) isClosed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closed
}

// close stops the receive loop and closes the pub/sub connection.
func (h *hub) close() {
	h.mu.Lock()
	h.closed = true
	for _, e := range h.entries {
		if e.linger != nil {
			e.linger.Stop()
		}
	}
	ps, done := h.ps, h.loopDone
	h.mu.Unlock()
	if ps != nil {
		_ = ps.Close()
		<-done
	}
}
