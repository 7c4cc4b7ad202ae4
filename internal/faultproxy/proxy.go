package faultproxy

import (
	"context"
	"errors"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Direction says which way of a connection a fault affects. The values are
// bits: Both is Upstream|Downstream.
type Direction uint8

const (
	// Upstream is client→server traffic.
	Upstream Direction = 1 << iota
	// Downstream is server→client traffic.
	Downstream
	// Both is traffic either way.
	Both = Upstream | Downstream
)

// Indexes of per-direction state; Direction bit i is index i.
const (
	up   = 0
	down = 1
)

func (d Direction) has(i int) bool { return d&(1<<i) != 0 }

func (d Direction) String() string {
	switch d & Both {
	case Upstream:
		return "upstream"
	case Downstream:
		return "downstream"
	case Both:
		return "both"
	}
	return "none"
}

// Proxy forwards every connection accepted on a loopback port to a target
// address, applying the faults currently set. Its methods are safe for
// concurrent use.
type Proxy struct {
	ln     net.Listener
	target string
	// ctx is canceled by Close so that dials in flight give up at once.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // every goroutine of the proxy and its connections

	closeOnce sync.Once
	closeErr  error

	// dropped counts the bytes a blackhole dropped, by direction index.
	dropped byteCounts

	mu       sync.Mutex
	closed   bool
	drop     Direction
	latency  [2]time.Duration
	refuse   bool
	conns    []*Conn // live, in accept order
	accepted int
}

// Start starts a proxy to target and closes it when the test ends.
func Start(tb testing.TB, target string) *Proxy {
	tb.Helper()
	p, err := New(target)
	if err != nil {
		tb.Fatalf("faultproxy: %v", err)
	}
	tb.Cleanup(func() { _ = p.Close() })
	return p
}

// New starts a proxy listening on 127.0.0.1 (a free port) that forwards to
// target. The caller must Close it.
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{ln: ln, target: target, ctx: ctx, cancel: cancel}
	p.spawn(p.acceptLoop)
	return p, nil
}

// Addr is the address clients dial: "127.0.0.1:<port>".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Close stops listening, closes every connection on both sides and waits
// for all the proxy's goroutines to end. Later calls return the first
// call's result.
func (p *Proxy) Close() error {
	p.closeOnce.Do(func() {
		p.mu.Lock()
		p.closed = true
		conns := slices.Clone(p.conns)
		p.mu.Unlock()
		p.closeErr = p.ln.Close()
		p.cancel()
		for _, c := range conns {
			c.teardown(false)
		}
		p.wg.Wait()
	})
	return p.closeErr
}

// Blackhole drops traffic in dir on every connection, current and new:
// bytes are read and discarded, nothing is closed, and the bytes are never
// delivered later; chunks still waiting out a Latency are dropped too. It
// adds to directions already dropped; Heal clears them.
// A connection accepted while Upstream is dropped is not forwarded to the
// target before its first byte passes, so the target sees nothing of it.
func (p *Proxy) Blackhole(dir Direction) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drop |= dir & Both
}

// Latency delays every chunk of traffic in dir by d before forwarding it,
// on every connection. It is a delay, not a bandwidth cap: chunks read
// while earlier ones wait are delayed by d from their own arrival, and
// their order is kept. d <= 0 removes the delay.
func (p *Proxy) Latency(dir Direction, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range p.latency {
		if dir.has(i) {
			p.latency[i] = max(d, 0)
		}
	}
}

// RefuseNew makes the proxy reset every new connection as soon as it is
// accepted (the client's connect succeeds, its first read or write fails),
// like a host with nothing listening behind it.
func (p *Proxy) RefuseNew(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuse = on
}

// Reset closes every current connection abruptly, with a TCP RST to both
// the client and the target. New connections are unaffected (see
// RefuseNew).
func (p *Proxy) Reset() {
	for _, c := range p.Conns() {
		c.Reset()
	}
}

// Dropped is how many bytes a blackhole has dropped so far in dir, on
// every connection: a test can wait for a reply it expects dropped to be
// gone before it heals, instead of sleeping.
func (p *Proxy) Dropped(dir Direction) int64 { return p.dropped.in(dir) }

// byteCounts counts bytes by direction index.
type byteCounts [2]atomic.Int64

// in is the count of the directions of dir.
func (b *byteCounts) in(dir Direction) int64 {
	var n int64
	for i := range b {
		if dir.has(i) {
			n += b[i].Load()
		}
	}
	return n
}

// Heal restores normal forwarding: nothing dropped or delayed, on any
// connection (per-connection faults are cleared too), and new connections
// accepted. Connections that survived keep going; chunks already delayed
// still wait out their delay.
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.drop = 0
	p.latency = [2]time.Duration{}
	p.refuse = false
	conns := slices.Clone(p.conns)
	p.mu.Unlock()
	for _, c := range conns {
		c.Heal()
	}
}

// Conns returns the live connections in accept order. A connection whose
// close was dropped by a blackhole stays live (half-open) until Reset or
// Close.
func (p *Proxy) Conns() []*Conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.conns)
}

// ConnsMatching returns the live connections whose client has sent substr,
// compared without regard to ASCII case, within its first 64 KiB: for
// example "subscribe" finds go-redis pub/sub connections.
func (p *Proxy) ConnsMatching(substr string) []*Conn {
	var out []*Conn
	for _, c := range p.Conns() {
		if c.sentContains(substr) {
			out = append(out, c)
		}
	}
	return out
}

// Accepted is the number of connections accepted so far, refused ones
// included.
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

func (p *Proxy) acceptLoop() {
	for {
		nc, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: wait instead of spinning.
			select {
			case <-p.ctx.Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		p.admit(nc.(*net.TCPConn))
	}
}

func (p *Proxy) admit(client *net.TCPConn) {
	p.mu.Lock()
	p.accepted++
	if p.closed || p.refuse {
		p.mu.Unlock()
		abort(client)
		return
	}
	c := newConn(p, client)
	p.conns = append(p.conns, c)
	lazy := p.drop.has(up)
	p.mu.Unlock()
	c.start(lazy)
}

// mode is the proxy-wide fault for direction i.
func (p *Proxy) mode(i int) (drop bool, delay time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.drop.has(i), p.latency[i]
}

func (p *Proxy) remove(c *Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if i := slices.Index(p.conns, c); i >= 0 {
		p.conns = slices.Delete(p.conns, i, i+1)
	}
}

// spawn runs f in a goroutine that Close waits for.
func (p *Proxy) spawn(f func()) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		f()
	}()
}

// abort closes a TCP connection with an RST instead of a FIN: with a zero
// linger, close discards unsent data and resets.
func abort(c *net.TCPConn) {
	_ = c.SetLinger(0)
	_ = c.Close()
}
