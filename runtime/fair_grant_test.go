package runtime_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/lua"
	"github.com/lockgen/lockgen/runtime"
)

// A fair lock's release grants the lock to the head of the queue whatever
// Client (process) it waits in: the waiters go in queue order, and each
// holds the lock without an acquire of its own.
func TestFairGrantsGoToTheHeadAcrossClients(t *testing.T) {
	s, rdb, a := setup(t, nil)
	b := newClient(t, s.Client(t), nil)
	plain := s.Client(t)
	ctx := ctxT(t)
	for _, sc := range []*redis.Script{lua.FairAcquire, lua.FairRelease, lua.FairLeave} {
		sc.Load(ctx, plain) // so that no NOSCRIPT round is counted
	}
	holder := a.FairLock("fair", runtime.LockOptions{})
	held, err := holder.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const n = 6
	order := make(chan int, n)
	done := make(chan error, n)
	for i := range n {
		c := a
		if i%2 == 1 {
			c = b
		}
		m := c.FairLock("fair", runtime.LockOptions{})
		go func() {
			hctx, err := m.Lock(ctx)
			if err == nil {
				order <- i
				err = m.Unlock(hctx)
			}
			done <- err
		}()
		eventually(t, 5*time.Second, "waiter queued", func() bool { return rdb.LLen(ctx, "redisson_lock_queue:{fair}").Val() == int64(i+1) })
	}
	// Each waiter is asleep on its confirmed channel before the release.
	time.Sleep(50 * time.Millisecond)
	evals := commandCalls(t, plain, "evalsha")
	if err := holder.Unlock(held); err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	close(order)
	inOrder(t, order, 0)
	// One script call per release; the grantees sent no acquire.
	if got := commandCalls(t, plain, "evalsha") - evals; got != n+1 {
		t.Errorf("%d script calls for %d releases, want %d (the grantees send none)", got, n+1, n+1)
	}
	eventually(t, time.Second, "no keys left", func() bool { return len(keysLeft(t, rdb)) == 0 })
}

// A grant whose message is lost (the waiter's pub/sub connection killed
// as it was sent) is found by the waiter's next try, which counts it as
// its own acquisition: once, with its lease applied anew.
func TestFairGrantWithLostMessageIsTakenByTheNextTry(t *testing.T) {
	s, rdb, a := setup(t, nil)
	gate := new(dialGate)
	b := newClient(t, gatedClient(t, s.Addr(), gate), nil)
	plain := s.Client(t)
	ctx := ctxT(t)
	holder := a.FairLock("fair", runtime.LockOptions{})
	held, err := holder.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m := b.FairLock("fair", runtime.LockOptions{})
	got := queuedFairWaiter(t, rdb, func(ctx context.Context) (context.Context, error) { return m.Lock(ctx) })
	hctx := releaseWithGrantLost(t, plain, gate, holder, held, got)
	if vals := plain.HVals(ctx, "fair").Val(); len(vals) != 1 || vals[0] != "1" {
		t.Fatalf("hold counts %v, want the grantee's one hold", vals)
	}
	if err := m.Unlock(hctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Second, "no keys left", func() bool { return len(keysLeft(t, rdb)) == 0 })
}

// Waiters that give up at random (short waits, cancelled ctxs) while
// grants fly between two Clients: never two holders, and nothing is left
// locked or queued once everyone is done.
func TestFairGrantsSurviveWaitersGivingUp(t *testing.T) {
	s, rdb, a := setup(t, nil)
	b := newClient(t, s.Client(t), nil)
	ctx := ctxT(t)
	var rec intervals
	stop := time.Now().Add(1500 * time.Millisecond)
	errs := make(chan error, 16)
	for g := range 16 {
		c := a
		if g%2 == 1 {
			c = b
		}
		m := c.FairLock("fair", runtime.LockOptions{})
		go func() {
			var err error
			defer func() { errs <- err }()
			for i := 0; time.Now().Before(stop); i++ {
				wctx, cancel := context.WithCancel(ctx)
				wait := time.Duration((g+i)%4) * time.Millisecond
				if (g+i)%5 == 0 {
					wait = runtime.Forever
					time.AfterFunc(time.Duration(i%3)*time.Millisecond, cancel)
				}
				hctx, lerr := m.TryLock(wctx, wait, runtime.Watchdog)
				if lerr != nil {
					cancel()
					continue
				}
				start := time.Now()
				time.Sleep(100 * time.Microsecond)
				rec.add(start, time.Now())
				err = m.Unlock(hctx)
				cancel()
				if err != nil {
					return
				}
			}
		}()
	}
	for range 16 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := rec.overlaps(); n != 0 {
		t.Fatalf("%d overlapping holds", n)
	}
	t.Logf("%d holds", len(rec.iv))
	eventually(t, 2*time.Second, "nothing left locked or queued", func() bool { return len(keysLeft(t, rdb)) == 0 })
}

// With Options.NoHandoff a fair lock's release wakes the head with
// Redisson's "0", and the head takes the lock with its own acquire.
func TestFairLockWithoutHandoffWakesTheHead(t *testing.T) {
	_, rdb, c := setup(t, &runtime.Options{NoHandoff: true})
	ctx := ctxT(t)
	holder := c.FairLock("fair", runtime.LockOptions{})
	held, err := holder.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sub := rdb.PSubscribe(ctx, "redisson_lock__channel:{fair}*")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	m := c.FairLock("fair", runtime.LockOptions{})
	done := make(chan error, 1)
	go func() {
		hctx, err := m.Lock(ctx)
		if err == nil {
			err = m.Unlock(hctx)
		}
		done <- err
	}()
	eventually(t, 5*time.Second, "waiter queued", func() bool { return rdb.LLen(ctx, "redisson_lock_queue:{fair}").Val() == 1 })
	time.Sleep(50 * time.Millisecond)
	if n := rdb.Exists(ctx, "lockgen_fair_grants:{fair}").Val(); n != 0 {
		t.Fatal("a waiter that takes no grants recorded a lease to be granted with")
	}
	if err := holder.Unlock(held); err != nil {
		t.Fatal(err)
	}
	msg, err := sub.ReceiveMessage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Payload != "0" {
		t.Fatalf("release published %q on %s, want Redisson's \"0\"", msg.Payload, msg.Channel)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A grant message that is not for the waiter's latest try (one delayed past
// a later try: its grant's lease may have run out and another owner taken
// the lock) is not claimed: the waiter tries instead, and waits on.
func TestFairGrantMessageOfAnEarlierTryIsNotClaimed(t *testing.T) {
	_, rdb, c := setup(t, nil)
	ctx := ctxT(t)
	holder := c.FairLock("fair", runtime.LockOptions{})
	held, err := holder.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m := c.FairLock("fair", runtime.LockOptions{})
	got := make(chan error, 1)
	go func() {
		hctx, err := m.Lock(ctx)
		if err == nil {
			err = m.Unlock(hctx)
		}
		got <- err
	}()
	eventually(t, 5*time.Second, "waiter queued", func() bool { return rdb.LLen(ctx, "redisson_lock_queue:{fair}").Val() == 1 })
	time.Sleep(50 * time.Millisecond)
	waiter := rdb.LIndex(ctx, "redisson_lock_queue:{fair}", 0).Val()
	channel := "redisson_lock__channel:{fair}:" + waiter
	if err := rdb.Publish(ctx, channel, "2:lockgen_latch:{fair}:an-earlier-try").Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		t.Fatalf("the waiter returned (%v) on a grant of an earlier try while the lock is held", err)
	case <-time.After(200 * time.Millisecond):
	}
	if q := rdb.LRange(ctx, "redisson_lock_queue:{fair}", 0, -1).Val(); len(q) != 1 || q[0] != waiter {
		t.Fatalf("queue %v, want the waiter still in line", q)
	}
	if err := holder.Unlock(held); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Second, "no keys left", func() bool { return len(keysLeft(t, rdb)) == 0 })
}

// queuedFairWaiter starts lock in a goroutine and returns once its waiter
// is in the queue of the fair lock "fair" and subscribed to its channel
// (a slow dial must not leave the subscription in flight past a kill of
// the pub/sub connections), and has had time for the try that follows
// the subscription's confirmation; the hold ctx (nil if lock failed)
// arrives on the channel.
func queuedFairWaiter(t *testing.T, rdb redis.UniversalClient, lock func(context.Context) (context.Context, error)) chan context.Context {
	t.Helper()
	ctx := ctxT(t)
	got := make(chan context.Context, 1)
	go func() {
		hctx, err := lock(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- hctx
	}()
	eventually(t, 5*time.Second, "waiter queued and subscribed", func() bool {
		q := rdb.LRange(ctx, "redisson_lock_queue:{fair}", 0, -1).Val()
		if len(q) != 1 {
			return false
		}
		n := rdb.PubSubNumSub(ctx, "redisson_lock__channel:{fair}:"+q[0]).Val()
		return n["redisson_lock__channel:{fair}:"+q[0]] == 1
	})
	time.Sleep(50 * time.Millisecond)
	return got
}

// dialGate holds the dials of a client (its Dialer) while closed.
type dialGate struct{ mu sync.RWMutex }

func (g *dialGate) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	g.mu.RLock()
	g.mu.RUnlock() //nolint:staticcheck // waits out a closed gate
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// gatedClient is a go-redis client of s whose dials wait while g is
// closed (a Client's hub copies its Dialer), closed when the test ends.
func gatedClient(t *testing.T, addr string, g *dialGate) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr, Dialer: g.dial})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// releaseWithGrantLost drops every pub/sub connection, then releases held:
// the grant's message reaches no one, and the hubs find their connections
// gone. The waiter's Client dials through g, closed from the kill until
// the release ran: its hub would otherwise subscribe again, on a loaded box
// before the release, whose message would then reach the waiter. It
// returns the hold the waiter on got takes all the same.
func releaseWithGrantLost(t *testing.T, plain *redis.Client, g *dialGate, holder *runtime.Mutex, held context.Context, got chan context.Context) context.Context {
	t.Helper()
	ctx := ctxT(t)
	g.mu.Lock()
	err := plain.ClientKillByFilter(ctx, "TYPE", "pubsub").Err()
	if err == nil {
		err = holder.Unlock(held)
	}
	g.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	select {
	case hctx := <-got:
		if hctx == nil {
			t.FailNow()
		}
		return hctx
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter never took the lock granted to it")
	}
	return nil
}
