package faultproxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

const (
	// keepSent bounds what a connection remembers of its client's bytes
	// for ConnsMatching: commands that identify a connection come early.
	keepSent = 64 << 10
	// dialTimeout bounds a dial to the target; Close cancels it sooner.
	dialTimeout = 5 * time.Second
)

// Conn is one client connection through the proxy and its connection to
// the target. Each direction has a reader goroutine that never waits for
// the peer (so a delay or a blackhole never stalls the sender) and a
// writer goroutine that forwards what the reader queued.
type Conn struct {
	p      *Proxy
	client *net.TCPConn
	ctx    context.Context // canceled on teardown: aborts a dial in flight
	cancel context.CancelFunc
	done   chan struct{} // closed on teardown
	queues [2]queue      // by direction index
	// dropped counts the bytes a blackhole dropped on this connection,
	// by direction index (Proxy.dropped counts every connection's).
	dropped byteCounts

	mu       sync.Mutex
	closed   bool
	server   *net.TCPConn // nil until dialed
	drop     Direction
	finished Direction // directions whose FIN has been passed on
	sent     []byte    // the client's first keepSent bytes
}

// item is one chunk read, with the time it may be forwarded.
type item struct {
	at   time.Time
	data []byte
	// end marks the last item of a direction: io.EOF for a FIN, anything
	// else for a reset. lost says it arrived during a blackhole, so the
	// peer must never learn of it.
	end  error
	lost bool
}

// queue is an unbounded FIFO: the reader must never block on it.
type queue struct {
	mu    sync.Mutex
	items []item
	ready chan struct{} // capacity 1: wakes the writer
}

func (q *queue) push(it item) {
	q.mu.Lock()
	q.items = append(q.items, it)
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default: // a wake-up is already pending
	}
}

// pop waits for the next item; false when done is closed first.
func (q *queue) pop(done <-chan struct{}) (item, bool) {
	for {
		q.mu.Lock()
		if len(q.items) > 0 {
			it := q.items[0]
			q.items[0] = item{} // let the chunk be collected
			q.items = q.items[1:]
			q.mu.Unlock()
			return it, true
		}
		q.mu.Unlock()
		select {
		case <-q.ready:
		case <-done:
			return item{}, false
		}
	}
}

func newConn(p *Proxy, client *net.TCPConn) *Conn {
	ctx, cancel := context.WithCancel(p.ctx)
	c := &Conn{p: p, client: client, ctx: ctx, cancel: cancel, done: make(chan struct{})}
	for i := range c.queues {
		c.queues[i].ready = make(chan struct{}, 1)
	}
	return c
}

// start runs the upstream half; the downstream half starts once the target
// is dialed: now, or, when lazy, when the first byte is to be forwarded.
func (c *Conn) start(lazy bool) {
	c.p.spawn(func() { c.read(up, c.client) })
	c.p.spawn(func() {
		var server *net.TCPConn
		if !lazy {
			if server = c.dial(); server == nil {
				return
			}
		}
		c.write(up, server)
	})
}

// Blackhole drops this connection's traffic in dir, on top of the
// proxy-wide faults, until Heal (this connection's or the proxy's).
func (c *Conn) Blackhole(dir Direction) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.drop |= dir & Both
}

// Heal stops dropping this connection's traffic, but for what the
// proxy-wide faults still drop.
func (c *Conn) Heal() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.drop = 0
}

// Reset closes the connection abruptly, with a TCP RST to both the client
// and the target.
func (c *Conn) Reset() { c.teardown(true) }

// mode combines the proxy-wide and the connection's faults for direction i.
func (c *Conn) mode(i int) (drop bool, delay time.Duration) {
	drop, delay = c.p.mode(i)
	c.mu.Lock()
	defer c.mu.Unlock()
	return drop || c.drop.has(i), delay
}

func (c *Conn) dial() *net.TCPConn {
	d := net.Dialer{Timeout: dialTimeout}
	nc, err := d.DialContext(c.ctx, "tcp", c.p.target)
	if err != nil {
		// What a client of a dead target would see.
		c.teardown(true)
		return nil
	}
	server := nc.(*net.TCPConn)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		_ = server.Close()
		return nil
	}
	c.server = server
	c.mu.Unlock()
	c.p.spawn(func() { c.read(down, server) })
	c.p.spawn(func() { c.write(down, c.client) })
	return server
}

// read queues what src sends in direction i, dropping it now if the
// direction is blackholed, so that healing cannot deliver it later.
func (c *Conn) read(i int, src *net.TCPConn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if i == up {
				c.record(buf[:n])
			}
			if drop, delay := c.mode(i); !drop {
				c.queues[i].push(item{at: time.Now().Add(delay), data: bytes.Clone(buf[:n])})
			} else {
				c.lose(i, n)
			}
		}
		if err != nil {
			select {
			case <-c.done:
				return // our own teardown, not the peer's doing
			default:
			}
			drop, delay := c.mode(i)
			c.queues[i].push(item{at: time.Now().Add(delay), end: err, lost: drop})
			return
		}
	}
}

// write forwards direction i's queue to dst; a nil dst (upstream only) is
// dialed when the first byte is to be forwarded.
func (c *Conn) write(i int, dst *net.TCPConn) {
	for {
		it, ok := c.queues[i].pop(c.done)
		if !ok || !c.sleepUntil(it.at) {
			return
		}
		// A blackhole that began while the chunk was delayed loses it too.
		if drop, _ := c.mode(i); drop || it.lost {
			c.lose(i, len(it.data))
			if it.end != nil {
				if dst == nil {
					c.teardown(false) // nothing was ever opened to the target
				}
				return // the peer never hears of the close: half-open
			}
			continue
		}
		if it.end != nil {
			switch {
			case dst == nil: // the target never saw the connection
				c.teardown(false)
			case errors.Is(it.end, io.EOF):
				_ = dst.CloseWrite()
				c.finish(i)
			default:
				c.teardown(true)
			}
			return
		}
		if dst == nil {
			if dst = c.dial(); dst == nil {
				return
			}
		}
		if _, err := dst.Write(it.data); err != nil {
			c.teardown(true)
			return
		}
	}
}

// sleepUntil waits until t; false if the connection is torn down first.
func (c *Conn) sleepUntil(t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return true
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-c.done:
		return false
	}
}

// finish notes that direction i's FIN was passed on; once both were, the
// connection is over.
func (c *Conn) finish(i int) {
	c.mu.Lock()
	c.finished |= 1 << i
	over := c.finished == Both
	c.mu.Unlock()
	if over {
		c.teardown(false)
	}
}

// teardown closes both sides, with an RST when abrupt, and stops the
// connection's goroutines. Only the first call acts.
func (c *Conn) teardown(abrupt bool) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	server := c.server
	c.mu.Unlock()
	c.cancel()
	close(c.done)
	for _, nc := range []*net.TCPConn{c.client, server} {
		if nc == nil {
			continue
		}
		if abrupt {
			abort(nc)
		} else {
			_ = nc.Close()
		}
	}
	c.p.remove(c)
}

// Dropped is how many bytes a blackhole has dropped so far in dir on this
// connection: with ConnsMatching, a test waits for the reply of one kind
// of connection (a data connection's, not a pub/sub message's).
func (c *Conn) Dropped(dir Direction) int64 { return c.dropped.in(dir) }

// lose counts n bytes a blackhole dropped in direction i.
func (c *Conn) lose(i, n int) {
	c.dropped[i].Add(int64(n))
	c.p.dropped[i].Add(int64(n))
}

func (c *Conn) record(b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := keepSent - len(c.sent); room > 0 {
		c.sent = append(c.sent, b[:min(room, len(b))]...)
	}
}

func (c *Conn) sentContains(substr string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Contains(asciiLower(c.sent), asciiLower([]byte(substr)))
}

// asciiLower folds ASCII letters only, leaving other bytes alone:
// bytes.ToLower would rewrite invalid UTF-8 in binary payloads.
func asciiLower(b []byte) []byte {
	out := make([]byte, len(b))
	for i, ch := range b {
		if 'A' <= ch && ch <= 'Z' {
			ch += 'a' - 'A'
		}
		out[i] = ch
	}
	return out
}
