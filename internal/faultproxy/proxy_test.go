package faultproxy_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/lockgen/lockgen/internal/faultproxy"
	"github.com/lockgen/lockgen/internal/redistest"
)

// setup starts a redis-server, a proxy in front of it and a direct client
// to check what really reached the server.
func setup(t *testing.T) (*faultproxy.Proxy, *redis.Client) {
	t.Helper()
	s := redistest.Start(t)
	return faultproxy.Start(t, s.Addr()), s.Client(t)
}

// client talks through the proxy without retries, so every fault surfaces
// as the error of the command that met it.
func client(t *testing.T, p *faultproxy.Proxy, readTimeout time.Duration) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{
		Addr:         p.Addr(),
		MaxRetries:   -1,
		DialTimeout:  time.Second,
		ReadTimeout:  readTimeout,
		WriteTimeout: time.Second,
		PoolSize:     1,
	})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func isConnError(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, syscall.EPIPE)
}

// dialRaw opens a plain TCP connection through the proxy, to see exactly
// which bytes come back.
func dialRaw(t *testing.T, p *faultproxy.Proxy) net.Conn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", p.Addr(), time.Second)
	if err != nil {
		t.Fatalf("dial proxy: %v", err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	return nc
}

func send(t *testing.T, nc net.Conn, cmd string) {
	t.Helper()
	if _, err := nc.Write([]byte(cmd)); err != nil {
		t.Fatalf("write %q: %v", cmd, err)
	}
}

// pingRaw sends a PING on a new connection and returns the first error met
// by the dial, the write or the read. A proxy that resets the connection
// at once fails the dial only if the RST wins the race against connect's
// return: the handshake itself is the kernel's.
func pingRaw(p *faultproxy.Proxy) error {
	nc, err := net.DialTimeout("tcp", p.Addr(), time.Second)
	if err != nil {
		return err
	}
	defer nc.Close()
	if _, err := nc.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	_, err = readFor(nc, time.Second)
	return err
}

// readFor returns everything nc sends within d, and the error that ended
// reading if it was not the deadline.
func readFor(nc net.Conn, d time.Duration) (string, error) {
	_ = nc.SetReadDeadline(time.Now().Add(d))
	var got bytes.Buffer
	buf := make([]byte, 4096)
	for {
		n, err := nc.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			if isTimeout(err) {
				err = nil
			}
			return got.String(), err
		}
	}
}

// readN reads exactly n bytes from nc within d.
func readN(nc net.Conn, n int, d time.Duration) (string, error) {
	_ = nc.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, n)
	got, err := io.ReadFull(nc, buf)
	return string(buf[:got]), err
}

// serverClients counts the server's client connections.
func serverClients(t *testing.T, direct *redis.Client) int {
	t.Helper()
	list, err := direct.ClientList(ctxT(t)).Result()
	if err != nil {
		t.Fatalf("CLIENT LIST: %v", err)
	}
	return strings.Count(strings.TrimSpace(list), "\n") + 1
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(3 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestForward(t *testing.T) {
	p, direct := setup(t)
	c := client(t, p, time.Second)
	ctx := ctxT(t)
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET through proxy: %v", err)
	}
	if got, err := c.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET through proxy = %q, %v; want v", got, err)
	}
	if got, _ := direct.Get(ctx, "k").Result(); got != "v" {
		t.Fatalf("GET direct = %q; want v", got)
	}
	if p.Accepted() != 1 || len(p.Conns()) != 1 {
		t.Fatalf("Accepted() = %d, len(Conns()) = %d; want 1, 1", p.Accepted(), len(p.Conns()))
	}
}

func TestBlackholeBoth(t *testing.T) {
	p, direct := setup(t)
	c := client(t, p, 200*time.Millisecond)
	ctx := ctxT(t)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}

	p.Blackhole(faultproxy.Both)
	if err := c.Set(ctx, "lost", "v", 0).Err(); !isTimeout(err) {
		t.Fatalf("SET in a blackhole: err = %v; want a timeout (not a closed connection)", err)
	}
	// go-redis closed its connection after the timeout, but the FIN was
	// dropped too: the proxy still holds both sides.
	if n := len(p.Conns()); n != 1 {
		t.Fatalf("len(Conns()) = %d; want 1 (half-open)", n)
	}

	// A new connection completes its handshake with the proxy, but the
	// server neither sees it nor its bytes.
	before := serverClients(t, direct)
	raw := dialRaw(t, p)
	send(t, raw, "PING\r\n")
	if got, err := readFor(raw, 200*time.Millisecond); got != "" || err != nil {
		t.Fatalf("raw PING in a blackhole got %q, %v; want nothing", got, err)
	}
	if after := serverClients(t, direct); after != before {
		t.Fatalf("server clients went from %d to %d during the blackhole", before, after)
	}

	p.Heal()
	if err := c.Set(ctx, "after", "v", 0).Err(); err != nil {
		t.Fatalf("SET after Heal: %v", err)
	}
	// The dropped PING stays dropped: one reply, to the new PING.
	send(t, raw, "PING\r\n")
	if got, err := readFor(raw, 500*time.Millisecond); got != "+PONG\r\n" || err != nil {
		t.Fatalf("raw PING after Heal got %q, %v; want exactly one +PONG", got, err)
	}
	if err := direct.Get(ctx, "lost").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET lost = %v; want redis.Nil: the dropped SET must never run", err)
	}
}

func TestBlackholeDownstream(t *testing.T) {
	p, direct := setup(t)
	c := client(t, p, 200*time.Millisecond)
	ctx := ctxT(t)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	raw := dialRaw(t, p)
	send(t, raw, "PING\r\n")
	if got, _ := readFor(raw, 300*time.Millisecond); got != "+PONG\r\n" {
		t.Fatalf("raw PING = %q", got)
	}

	p.Blackhole(faultproxy.Downstream)
	if err := c.Set(ctx, "k", "v", 0).Err(); !isTimeout(err) {
		t.Fatalf("SET with replies dropped: err = %v; want a timeout", err)
	}
	eventually(t, "the SET reached the server", func() bool {
		return direct.Get(ctx, "k").Val() == "v"
	})

	before := p.Dropped(faultproxy.Downstream)
	send(t, raw, "SET raw v\r\n")
	eventually(t, "the raw SET reached the server", func() bool {
		return direct.Get(ctx, "raw").Val() == "v"
	})
	// The server applies the SET before it replies: heal only once the
	// proxy has read (and dropped) the +OK, or it forwards it.
	eventually(t, "the raw SET's +OK dropped", func() bool {
		return p.Dropped(faultproxy.Downstream) >= before+int64(len("+OK\r\n"))
	})
	p.Heal()
	// The +OK of the SET was dropped, not held back.
	send(t, raw, "PING\r\n")
	if got, err := readFor(raw, 500*time.Millisecond); got != "+PONG\r\n" || err != nil {
		t.Fatalf("raw PING after Heal got %q, %v; want exactly one +PONG", got, err)
	}
}

func TestLatency(t *testing.T) {
	p, _ := setup(t)
	c := client(t, p, 5*time.Second)
	ctx := ctxT(t)
	if err := c.Ping(ctx).Err(); err != nil { // dial and handshake before timing
		t.Fatal(err)
	}

	const lat = 100 * time.Millisecond
	p.Latency(faultproxy.Downstream, lat)
	start := time.Now()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < lat || d > 5*time.Second {
		t.Fatalf("PING with %v downstream latency took %v", lat, d)
	}

	// A delay, not a throughput cap: 20 replies spread over ~200 ms all
	// arrive ~100 ms after their own sending, not 100 ms after each other.
	raw := dialRaw(t, p)
	start = time.Now()
	for range 20 {
		send(t, raw, "PING\r\n")
		time.Sleep(10 * time.Millisecond)
	}
	want := strings.Repeat("+PONG\r\n", 20)
	if got, err := readN(raw, len(want), 5*time.Second); got != want || err != nil {
		t.Fatalf("20 delayed PINGs: read %q, %v", got, err)
	}
	// The last PING leaves after 19 sleeps of at least 10 ms; its reply
	// comes lat after that.
	if d := time.Since(start); d < 190*time.Millisecond+lat || d >= 20*lat {
		t.Fatalf("20 delayed PINGs took %v; want at least 290ms (the last sent at 190ms, delayed 100ms), and less than the 2s of a serial delay", d)
	}

	p.Latency(faultproxy.Both, lat)
	start = time.Now()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 2*lat {
		t.Fatalf("PING with %v latency both ways took %v", lat, d)
	}
}

func TestResetAndRefuse(t *testing.T) {
	p, direct := setup(t)
	c := client(t, p, time.Second)
	ctx := ctxT(t)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}

	// An in-flight command: BLPOP blocks on the server until the reset.
	errc := make(chan error, 1)
	go func() { errc <- c.BLPop(ctx, 5*time.Second, "empty").Err() }()
	eventually(t, "BLPOP blocks", func() bool {
		return strings.Contains(direct.Info(ctx, "clients").Val(), "blocked_clients:1")
	})
	raw := dialRaw(t, p)
	send(t, raw, "PING\r\n")
	if got, _ := readFor(raw, 300*time.Millisecond); got != "+PONG\r\n" {
		t.Fatalf("raw PING = %q", got)
	}

	p.Reset()
	select {
	case err := <-errc:
		if !isConnError(err) {
			t.Fatalf("BLPOP across Reset: err = %v; want ECONNRESET or EOF", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("BLPOP did not fail after Reset")
	}
	// The next command on an old connection fails too, at the write if
	// the RST has already arrived, else at the read.
	_, err := raw.Write([]byte("PING\r\n"))
	if err == nil {
		_, err = readFor(raw, time.Second)
	}
	if !isConnError(err) {
		t.Fatalf("raw PING after Reset: err = %v; want ECONNRESET or EOF", err)
	}
	// The server side was reset as well: only the direct client is left.
	eventually(t, "the server drops the reset connections", func() bool {
		return serverClients(t, direct) == 1
	})
	if n := len(p.Conns()); n != 0 {
		t.Fatalf("len(Conns()) = %d after Reset; want 0", n)
	}
	// New connections still work.
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING on a new connection after Reset: %v", err)
	}

	p.RefuseNew(true)
	p.Reset()
	accepted := p.Accepted()
	if err := c.Ping(ctx).Err(); !isConnError(err) {
		t.Fatalf("PING while refusing: err = %v; want ECONNRESET or EOF", err)
	}
	if err := pingRaw(p); !isConnError(err) {
		t.Fatalf("raw connection while refusing: err = %v; want ECONNRESET or EOF", err)
	}
	// At least the raw one; go-redis may have met the RST on its pooled
	// connection instead of dialing.
	if p.Accepted() <= accepted {
		t.Fatalf("Accepted() = %d; want more than %d: refused connections count", p.Accepted(), accepted)
	}

	p.Heal()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after Heal: %v", err)
	}
}

func TestConnsMatchingPubSub(t *testing.T) {
	p, direct := setup(t)
	// RESP2: with RESP3, go-redis v9.20.1 takes the subscribe confirmation
	// for a push notification, so ps.Receive waits for the context's
	// deadline and ps.Channel hands each message over only when the next
	// one arrives.
	c := redis.NewClient(&redis.Options{Addr: p.Addr(), Protocol: 2, MaxRetries: -1, ReadTimeout: time.Second})
	t.Cleanup(func() { _ = c.Close() })
	ctx := ctxT(t)
	ps := c.Subscribe(ctx, "news")
	defer ps.Close()
	msgs := ps.Channel()
	eventually(t, "the server counts the subscriber", func() bool {
		return direct.PubSubNumSub(ctx, "news").Val()["news"] == 1
	})
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	expect := func(want string) {
		t.Helper()
		select {
		case m := <-msgs:
			if m.Payload != want {
				t.Fatalf("got message %q; want %q", m.Payload, want)
			}
		case <-time.After(3 * time.Second):
			t.Fatalf("message %q not delivered", want)
		}
	}
	publish := func(msg string) {
		t.Helper()
		if n, err := c.Publish(ctx, "news", msg).Result(); err != nil || n != 1 {
			t.Fatalf("PUBLISH %s = %d, %v; want 1 receiver", msg, n, err)
		}
	}

	subs := p.ConnsMatching("SUBSCRIBE")
	if len(subs) != 1 || len(p.Conns()) != 2 {
		t.Fatalf("ConnsMatching found %d of %d connections; want 1 of 2", len(subs), len(p.Conns()))
	}
	publish("m1")
	expect("m1")

	subs[0].Blackhole(faultproxy.Both)
	publish("m2") // the server still counts the subscriber
	select {
	case m := <-msgs:
		t.Fatalf("message %q delivered through a blackholed connection", m.Payload)
	case <-time.After(300 * time.Millisecond):
	}
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET on the other connection: %v", err)
	}

	subs[0].Heal()
	publish("m3")
	expect("m3") // m2 was dropped, not delayed

	subs[0].Blackhole(faultproxy.Downstream)
	p.Heal() // heals per-connection faults too
	publish("m4")
	expect("m4")
}

func TestDeadTarget(t *testing.T) {
	// Reserve a port and free it: nothing listens there.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()

	p := faultproxy.Start(t, addr)
	if err := pingRaw(p); !isConnError(err) {
		t.Fatalf("read through a proxy to a dead target: err = %v; want ECONNRESET or EOF", err)
	}
}

func TestCloseLeavesNothing(t *testing.T) {
	s := redistest.Start(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	p, err := faultproxy.New(s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	dial := func() net.Conn {
		nc, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = nc.Close() })
		return nc
	}
	plain := dial()
	send(t, plain, "PING\r\n")
	if got, _ := readFor(plain, 300*time.Millisecond); got != "+PONG\r\n" {
		t.Fatalf("raw PING = %q", got)
	}
	p.Latency(faultproxy.Downstream, time.Minute)
	send(t, plain, "PING\r\n") // a reply now waits in the delay queue
	p.Blackhole(faultproxy.Both)
	send(t, dial(), "PING\r\n") // never forwarded, never dialed
	eventually(t, "two connections", func() bool { return len(p.Conns()) == 2 })
	for _, c := range p.Conns() { // a per-connection fault on a closing proxy
		c.Blackhole(faultproxy.Upstream)
	}

	start := time.Now()
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Close took %v with a reply delayed by a minute", d)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := readFor(plain, time.Second); !isConnError(err) {
		t.Fatalf("read after Close: err = %v; want EOF", err)
	}
	if nc, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		_ = nc.Close()
		t.Fatal("the proxy still accepts after Close")
	}
	if n := len(p.Conns()); n != 0 {
		t.Fatalf("len(Conns()) = %d after Close", n)
	}
}
