package runtime_test

import (
	"bufio"
	"context"
	"log/slog"
	"net"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/faultproxy"
	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/runtime"
)

// slowTry is a go-redis hook that, once armed, holds the next script call
// (an acquire try) before it is sent until `send` is closed, and after its
// reply until `deliver` is closed: a request overtaken on the way by
// another client's, and a reply delayed on the way back. Hooks belong to
// the go-redis client, not to its options, so the hub's own copy of the
// client is not slowed.
type slowTry struct {
	mu      sync.Mutex
	armed   bool
	held    chan struct{} // closed when the try is held before sending
	send    chan struct{}
	replied chan struct{} // closed when the try's reply is in
	deliver chan struct{}
}

func (h *slowTry) arm() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.armed = true
	h.held = make(chan struct{})
	h.send = make(chan struct{})
	h.replied = make(chan struct{})
	h.deliver = make(chan struct{})
}

func (h *slowTry) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *slowTry) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		name := strings.ToLower(cmd.Name())
		h.mu.Lock()
		take := h.armed && (name == "evalsha" || name == "eval")
		if take {
			h.armed = false
		}
		held, send, replied, deliver := h.held, h.send, h.replied, h.deliver
		h.mu.Unlock()
		if !take {
			return next(ctx, cmd)
		}
		close(held)
		<-send

		err := next(ctx, cmd)
		close(replied)
		<-deliver
		return err
	}
}
func (h *slowTry) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// trackReads counts the EXISTS of key that clients (not scripts) sent:
// the hub's tracking reads, seen through MONITOR.
type trackReads struct {
	mu sync.Mutex
	n  int
}

func watchTrackReads(t *testing.T, addr, key string) *trackReads {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		t.Fatal(err)
	}
	r := &trackReads{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(conn)
		sc.Buffer(make([]byte, 1<<16), 1<<20)
		want := `] "exists" "` + key + `"`
		for sc.Scan() {
			line := sc.Text()
			if strings.HasSuffix(line, want) && !strings.Contains(line, " lua]") {
				r.mu.Lock()
				r.n++
				r.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { _ = conn.Close(); <-done })
	return r
}

func (r *trackReads) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// after waits until more than n reads were seen and returns their number.
func (r *trackReads) after(t *testing.T, n int) int {
	t.Helper()
	var m int
	eventually(t, 5*time.Second, "the hub's tracking read", func() bool {
		m = r.count()
		return m > n
	})
	return m
}

// A key deleted while a woken waiter's try is on its way back must still
// wake the waiter: its try saw the lock held (by an owner that took it
// between the unlock message and the try), and the deletion came after.
// Nothing else will wake it before the holder's TTL (30 s here).
func TestKeyDeletedDuringAWokenWaitersTryWakesIt(t *testing.T) {
	s := redistest.Start(t)
	admin := s.Client(t)
	ctx := ctxT(t)
	holder := newClient(t, s.Client(t), nil)
	other := newClient(t, s.Client(t), nil)
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	slow := &slowTry{}
	rdb.AddHook(slow)
	waiter := newClient(t, rdb, nil)

	const key = "review:track:inflight"
	reads := watchTrackReads(t, s.Addr(), key)
	hm := holder.Mutex(key, runtime.LockOptions{})
	h, err := hm.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := waitInBackground(ctx, waiter, key)
	channel := "redisson_lock__channel:{" + key + "}"
	eventually(t, 5*time.Second, "waiter subscribed", func() bool {
		return admin.PubSubNumSub(ctx, channel).Val()[channel] == 1
	})
	n := reads.after(t, 0) // the key is watched

	slow.arm()
	if err := hm.Unlock(h); err != nil { // publishes: the waiter is woken
		t.Fatal(err)
	}
	<-slow.held
	n = reads.after(t, n) // the unlock's DEL was read (a hand-off is in flight)
	om := other.Mutex(key, runtime.LockOptions{})
	oh, err := om.TryLock(ctx, 0, runtime.Watchdog) // another process gets there first
	if err != nil {
		t.Fatal(err)
	}
	n = reads.after(t, n) // its new key was read: tracking armed
	close(slow.send)
	<-slow.replied                                    // the waiter's try saw the other owner's hold (30 s)
	if err := admin.Del(ctx, key).Err(); err != nil { // an operator frees it
		t.Fatal(err)
	}
	reads.after(t, n) // the hub read the deletion
	// MONITOR shows the read when the server gets it; give the hub time to
	// act on its reply before the waiter's try ends (a loaded box can only
	// make this test pass wrongly, never fail wrongly).
	time.Sleep(100 * time.Millisecond)
	deleted := time.Now()
	close(slow.deliver)

	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("acquired %v after the DEL", time.Since(deleted).Round(time.Millisecond))
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter sleeps through a deleted key: the hub saw it gone while the waiter's try was in flight and woke nobody")
	}
	_ = om.Unlock(oh)
}

// trackingClientID is the CLIENT ID of the connection that has key
// tracking on with a redirect (the hub's tracking connection).
func trackingClientID(t *testing.T, admin *redis.Client) string {
	t.Helper()
	var id string
	eventually(t, 5*time.Second, "a tracking connection", func() bool {
		list, err := admin.ClientList(context.Background()).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(list, "\n") {
			fields := map[string]string{}
			for _, f := range strings.Fields(line) {
				k, v, _ := strings.Cut(f, "=")
				fields[k] = v
			}
			if strings.Contains(fields["flags"], "t") && fields["redir"] != "" && fields["redir"] != "-1" {
				id = fields["id"]
				return true
			}
		}
		return false
	})
	return id
}

// The tracking connection is a plain connection that is idle while the
// lock does not change: an operator's CLIENT KILL, a server's idle
// timeout or a NAT dropping the idle flow ends it without a word to the
// pub/sub connection, which stays healthy (it is pinged). A key deleted
// afterwards must still wake the waiter, not leave it asleep until the
// holder's TTL (30 s).
func TestKeyDeletedAfterTheTrackingConnectionDiedWakesTheWaiter(t *testing.T) {
	// A server of its own; its bound (5 s) is far from a loaded
	// machine's delays.
	t.Parallel()
	s := redistest.Start(t)
	admin := s.Client(t)
	ctx := ctxT(t)
	holder := newClient(t, s.Client(t), nil)
	waiter := newClient(t, s.Client(t), nil)
	const key = "review:track:killed"
	reads := watchTrackReads(t, s.Addr(), key)
	hm := holder.Mutex(key, runtime.LockOptions{})
	h, err := hm.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := waitInBackground(ctx, waiter, key)
	reads.after(t, 0) // watched
	id := trackingClientID(t, admin)
	if err := admin.Do(ctx, "client", "kill", "id", id).Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the pub/sub connection is pinged meanwhile, and answers
	if err := admin.Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	expectAcquired(t, got, 5*time.Second, "the waiter sleeps through a deleted key: the tracking connection was killed and nothing noticed")
	_ = hm.Unlock(h)
}

// The same with a server that closes idle clients (redis.conf timeout, set
// in many deployments): the tracking connection idles between changes of
// the key, the pub/sub connection is exempt and stays.
func TestKeyDeletedAfterTheServerTimedOutTheIdleTrackingConnectionWakesTheWaiter(t *testing.T) {
	skipShortOutsideCI(t)
	t.Parallel() // servers of its own; it waits out seconds-long timeouts
	s := redistest.Start(t, redistest.Arg("--timeout", "1"))
	ctx := ctxT(t)
	holder := newClient(t, s.Client(t), nil)
	waiter := newClient(t, s.Client(t), nil)
	const key = "review:track:timeout"
	reads := watchTrackReads(t, s.Addr(), key)
	hm := holder.Mutex(key, runtime.LockOptions{})
	h, err := hm.TryLock(ctx, 0, time.Minute) // a fixed lease: no renewal touches the key
	if err != nil {
		t.Fatal(err)
	}
	got := waitInBackground(ctx, waiter, key)
	reads.after(t, 0)           // watched
	time.Sleep(3 * time.Second) // the server's idle timeout (1 s, checked in its cron) passes
	if err := s.Client(t).Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	expectAcquired(t, got, 5*time.Second, "the waiter sleeps through a deleted key: the server closed the idle tracking connection and nothing noticed")
	_ = hm.Unlock(h)
}

// Close must not wait out the hub's I/O timeout (5 s) on a tracking read
// that gets no reply: the tracking connection is the hub's own, and
// closing the Client may close it.
func TestCloseDoesNotWaitForAStuckTrackingRead(t *testing.T) {
	s := redistest.Start(t)
	p := faultproxy.Start(t, s.Addr())
	ctx := ctxT(t)
	holder := newClient(t, s.Client(t), nil)
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	waiter, err := runtime.NewClient(rdb, &runtime.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = waiter.Close() })
	const key = "review:track:close"
	reads := watchTrackReads(t, s.Addr(), key)
	hm := holder.Mutex(key, runtime.LockOptions{})
	h, err := hm.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		m := waiter.Mutex(key, runtime.LockOptions{})
		if w, err := m.TryLock(ctx, 20*time.Second, runtime.Watchdog); err == nil {
			_ = m.Unlock(w)
		}
	}()
	n := reads.after(t, 0)
	var tracking []*faultproxy.Conn
	eventually(t, 5*time.Second, "the tracking connection", func() bool {
		tracking = p.ConnsMatching("tracking")
		return len(tracking) == 1
	})
	tracking[0].Blackhole(faultproxy.Downstream)
	if err := s.Client(t).PExpire(ctx, key, time.Minute).Err(); err != nil { // a change: one tracking read
		t.Fatal(err)
	}
	reads.after(t, n)
	start := time.Now()
	closed := make(chan struct{})
	var stuck string
	dumped := make(chan struct{})
	go func() {
		defer close(dumped)
		select {
		case <-closed:
		case <-time.After(time.Second):
			buf := make([]byte, 1<<20)
			for _, g := range strings.Split(string(buf[:goruntime.Stack(buf, true)]), "\n\n") {
				if strings.Contains(g, "lockgen/runtime/internal/hub.") {
					stuck += g + "\n\n"
				}
			}
		}
	}()
	_ = waiter.Close()
	close(closed)
	<-dumped
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Close took %v: it waited for the tracking read's I/O timeout; after 1 s it was waiting for:\n%s", d.Round(time.Millisecond), stuck)
	}
	_ = hm.Unlock(h)
}
