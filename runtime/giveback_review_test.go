package runtime_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/lockgen/lockgen/internal/faultproxy"
	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/runtime"
)

// What a hold lost at its deadline gives back (giveback.go), attacked: a
// give-back must only ever remove what the lost hold left in Redis, never
// a hold of another owner nor one the same owner took again; it must run
// with go-redis' default options once the network heals, and end with
// Close.

// gbEnv is one server behind a proxy: the holder's Client talks through the
// proxy (its replies can be lost), the other Client directly.
type gbEnv struct {
	ps     []*faultproxy.Proxy // the holder's links
	cut    *renewalCut         // on the holder's connections: cuts ps at a renewal
	direct redis.UniversalClient
	holder *runtime.Client
	other  *runtime.Client
	wd     time.Duration
}

func newGBEnv(t *testing.T, wd time.Duration, proxied *redis.Options) *gbEnv {
	t.Helper()
	s := redistest.Start(t)
	p := faultproxy.Start(t, s.Addr())
	if proxied == nil {
		proxied = &redis.Options{ReadTimeout: 200 * time.Millisecond, MaxRetries: -1}
	}
	proxied.Addr = p.Addr()
	cut := newRenewalCut(p)
	proxied.Dialer = cut.dialer(nil)
	pc := redis.NewClient(proxied)
	t.Cleanup(func() { _ = pc.Close() })
	direct := s.Client(t)
	return &gbEnv{
		ps:     []*faultproxy.Proxy{p},
		cut:    cut,
		direct: direct,
		holder: newClient(t, pc, &runtime.Options{WatchdogTimeout: wd, ReleaseTimeout: 300 * time.Millisecond}),
		other:  newClient(t, direct, &runtime.Options{WatchdogTimeout: wd}),
		wd:     wd,
	}
}

// loseByLostReplies lets a renewal of held be confirmed, then loses every
// reply from Redis from the moment the next renewal of held is written
// until held's ctx is done: that renewal arrives and sets a full lease
// again, its reply is lost. It returns the longest TTL of the keys
// matching pattern at the loss (a renewal of held names the pattern
// without its '*'s); the network stays cut.
func (e *gbEnv) loseByLostReplies(t *testing.T, held context.Context, pattern string) time.Duration {
	t.Helper()
	return e.loseByLostRepliesTTL(t, held, strings.Trim(pattern, "*"), e.longestTTL(pattern))
}

// longestTTL reads the longest TTL of the keys matching pattern.
func (e *gbEnv) longestTTL(pattern string) func(context.Context) time.Duration {
	return func(ctx context.Context) time.Duration {
		var ttl time.Duration
		for _, k := range e.direct.Keys(ctx, pattern).Val() {
			ttl = max(ttl, e.direct.PTTL(ctx, k).Val())
		}
		return ttl
	}
}

// loseByLostRepliesTTL is loseByLostReplies with key, a string every
// renewal of held names, and ttl reading what is left in Redis of the
// hold.
func (e *gbEnv) loseByLostRepliesTTL(t *testing.T, held context.Context, key string, ttlLeft func(context.Context) time.Duration) time.Duration {
	t.Helper()
	e.cut.atNextRenewal(t, key, e.wd, ttlLeft)
	select {
	case <-held.Done():
	case <-time.After(2 * e.wd):
		t.Fatal("the hold's ctx outlived its deadline")
	}
	if !errors.Is(context.Cause(held), runtime.ErrLockLost) {
		t.Fatalf("cause %v, want ErrLockLost", context.Cause(held))
	}
	ttl := ttlLeft(context.Background())
	if ttl <= 0 {
		t.Fatalf("TTL in Redis %v at the loss: what the renewal that arrived set ran out before the hold's ctx ended", ttl)
	}
	return ttl
}

// renewalCut makes a one-way fault at a chosen moment: once armed, the
// first write of a renewal naming a key, on any connection it dialled,
// blackholes the replies on its proxies just before the renewal goes out.
// The renewal reaches Redis (it is written on an open connection, past
// its handshake, and requests still flow) and its reply is lost: what a
// cut made by the clock would do only when it happened to fall between a
// renewal's send and its reply, and no new connection was needed (one
// dialled into the cut waits for HELLO's reply and sends nothing).
type renewalCut struct {
	ps    []*faultproxy.Proxy
	mu    sync.Mutex
	key   string        // armed: what the renewal to cut names
	fired chan struct{} // closed at the cut
	// setup: reads on its connections wait without the client's
	// ReadTimeout (see setupReads).
	setup atomic.Bool
}

// setupReads makes reads on the cut's connections wait without a deadline
// while on: a test's holder takes its lock through them with a short
// ReadTimeout (200 ms, for the cut and the heal), which a stall of the
// loaded test process overran (a read whose deadline passed while the
// process was descheduled fails though its reply is there), failing the
// acquisition the test is about to cut. The call's own bound still ends
// it.
func (r *renewalCut) setupReads(on bool) { r.setup.Store(on) }

func newRenewalCut(ps ...*faultproxy.Proxy) *renewalCut { return &renewalCut{ps: ps} }

// dialer wraps dial (nil: a net.Dialer's) so that the cut sees every
// write of the connections it makes.
func (r *renewalCut) dialer(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return cutConn{c, r}, nil
	}
}

type cutConn struct {
	net.Conn
	r *renewalCut
}

func (c cutConn) Write(b []byte) (int, error) {
	c.r.seen(b)
	return c.Conn.Write(b)
}

func (c cutConn) SetReadDeadline(t time.Time) error {
	if c.r.setup.Load() {
		t = time.Time{}
	}
	return c.Conn.SetReadDeadline(t)
}

// renewalScript is how a renewal is sent: EVALSHA of the renewal script
// (a first round's NOSCRIPT resend too, after SCRIPT LOAD).
var renewalScript = []byte("evalsha")

func (r *renewalCut) seen(b []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.key == "" || !bytes.Contains(bytes.ToLower(b), renewalScript) || !bytes.Contains(b, []byte(r.key)) {
		return
	}
	for _, p := range r.ps {
		p.Blackhole(faultproxy.Downstream)
	}
	r.key = ""
	close(r.fired)
}

// atNextRenewal waits until a renewal of a hold on key has reached Redis
// (afterRenewal), cuts the replies at the next renewal that names key, and
// returns once Redis has that renewal. wd is the hold's lease.
func (r *renewalCut) atNextRenewal(t *testing.T, key string, wd time.Duration, ttlLeft func(context.Context) time.Duration) {
	t.Helper()
	renewed := r.afterRenewal(t, wd, ttlLeft)
	select {
	case <-r.arm(key):
	case <-time.After(wd):
		t.Fatalf("no renewal naming %s written within %v of the last", key, wd)
	}
	eventually(t, wd/3, "the renewal sent into the cut reaches Redis", func() bool {
		return expiryOf(ttlLeft).Sub(renewed) > wd/10
	})
}

// afterRenewal waits until a renewal of the hold whose TTL ttlLeft reads
// has reached Redis (its expiry moves on: the renewal script is loaded
// and the link works) and returns the expiry it set, half a renewal
// period later. Renewals come in rounds a period (wd/3) apart, the calls
// of one round within a watchdog tick (wd/60) of each other: armed then,
// the cut lands on the first call of the next round, never on a later
// call of the round just seen, whose holds (or RedLock parts) were
// confirmed a moment before and so would be lost only a full lease after
// the cut, with nothing left in Redis by then.
func (r *renewalCut) afterRenewal(t *testing.T, wd time.Duration, ttlLeft func(context.Context) time.Duration) time.Time {
	t.Helper()
	first := expiryOf(ttlLeft)
	var renewed time.Time
	eventually(t, wd, "a renewal on a healthy link", func() bool {
		renewed = expiryOf(ttlLeft)
		return renewed.Sub(first) > wd/10
	})
	time.Sleep(wd / 6)
	return renewed
}

// arm makes the next write of a renewal naming key cut the replies; the
// channel is closed at the cut.
func (r *renewalCut) arm(key string) <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.key, r.fired = key, make(chan struct{})
	return r.fired
}

// expiryOf is a hold's expiry in Redis as now + the TTL ttlLeft reads: it
// moves only when a write sets it.
func expiryOf(ttlLeft func(context.Context) time.Duration) time.Time {
	return time.Now().Add(ttlLeft(context.Background()))
}

// givenBackWithin is how soon after Redis answers again a hold lost with
// ttl left in Redis must be given back: well before that ttl runs out (as
// TestLostHoldIsGivenBackOnceRedisAnswers bounds it), so that what frees
// the lock is the give-back and not the expiry. It was ttl/2, which also
// asked the settler to be quick: in a full run under load its backoff
// (20 ms doubling, while Redis did not answer) put the give-back over 506 ms
// after the heal with a TTL of 1.01 s left, which says nothing against it.
func givenBackWithin(ttl time.Duration) time.Duration { return ttl - ttl/5 }

// heal restores the holder's links.
func (e *gbEnv) heal() {
	for _, p := range e.ps {
		p.Heal()
	}
}

// holdingKinds are the Mutex kinds whose give-back reconciles the owner's
// count (giveBackLost of a Mutex).
var holdingKinds = append(append([]lockKind{}, exclusiveKinds...), readKind)

// The owner of a lost hold that still holds an outer lock takes the lost
// lock again with the outer ctx (same owner token, same hash field) at the
// moment Redis answers again, racing the background give-back: the new
// hold must survive it, in Redis and in its ctx.
func TestGiveBackSparesTheSameOwnerTakingTheLockAgain(t *testing.T) {
	skipShortOutsideCI(t)
	t.Parallel()
	for _, k := range holdingKinds {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			e := newGBEnv(t, 3*time.Second, nil)
			ctx := context.Background()
			key := "gb:again:" + k.name
			outer := e.holder.Mutex("gb:again:outer:"+k.name, runtime.LockOptions{})
			e.cut.setupReads(true)
			octx, err := outer.TryLock(ctx, setupWait, time.Minute) // fixed lease: not renewed, not lost
			if err != nil {
				t.Fatal(err)
			}
			l := k.new(e.holder, key, runtime.LockOptions{})
			held, err := l.TryLock(octx, setupWait, runtime.Watchdog)
			e.cut.setupReads(false)
			if err != nil {
				t.Fatal(err)
			}
			e.loseByLostReplies(t, held, key+"*")
			if octx.Err() != nil {
				t.Fatalf("the outer hold ended too: %v", context.Cause(octx))
			}
			// The owner tries again while Redis is still cut off, and on,
			// until it holds the lock: its first try after the heal races
			// the give-back for the owner's turn.
			type result struct {
				ctx context.Context
				err error
			}
			again := make(chan result, 1)
			go func() {
				for {
					h, err := l.TryLock(octx, 0, runtime.Watchdog)
					if err == nil || !errors.Is(err, runtime.ErrOutcomeUnknown) {
						again <- result{h, err}
						return
					}
				}
			}()
			time.Sleep(50 * time.Millisecond)
			e.heal()
			r := <-again
			if r.err != nil {
				t.Fatalf("taking the lock again with the outer ctx: %v", r.err)
			}
			// Past any give-back (it starts when Redis answers, and is done
			// in well under a renewal period) and past a renewal of the new
			// hold: the owner still holds it, once, and no one else can
			// have it.
			deadline := time.Now().Add(e.wd/3 + e.wd/10)
			for time.Now().Before(deadline) {
				n, err := l.HoldCount(r.ctx)
				if err != nil {
					t.Fatal(err)
				}
				if n != 1 {
					t.Fatalf("the owner's hold count in Redis is %d after the give-back, want 1", n)
				}
				if err := context.Cause(r.ctx); err != nil {
					t.Fatalf("the hold taken again ended: %v", err)
				}
				time.Sleep(20 * time.Millisecond)
			}
			if _, err := k.new(e.other, key, runtime.LockOptions{}).TryLock(ctx, 0, runtime.Watchdog); k.name != "read" && !errors.Is(err, runtime.ErrNotAcquired) {
				t.Fatalf("another owner's TryLock = %v while the owner holds the lock again, want ErrNotAcquired", err)
			}
			if err := l.Unlock(r.ctx); err != nil {
				t.Fatalf("Unlock of the hold taken again: %v", err)
			}
			if err := l.Unlock(held); !errors.Is(err, runtime.ErrLockLost) {
				t.Fatalf("Unlock of the lost hold = %v, want ErrLockLost", err)
			}
			if err := outer.Unlock(octx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A nested hold (the owner re-entered: count 2 in Redis) lost at its
// deadline is given back whole: the next owner gets the lock, and a read
// hold leaves none of its rwlock_timeout keys behind.
func TestGiveBackReturnsEveryNestedHold(t *testing.T) {
	skipShortOutsideCI(t)
	t.Parallel()
	for _, k := range holdingKinds {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			e := newGBEnv(t, 3*time.Second, nil)
			ctx := context.Background()
			key := "gb:nested:" + k.name
			l := k.new(e.holder, key, runtime.LockOptions{})
			e.cut.setupReads(true)
			outer, err := l.TryLock(ctx, setupWait, runtime.Watchdog)
			if err != nil {
				t.Fatal(err)
			}
			inner, err := l.TryLock(outer, setupWait, runtime.Watchdog)
			e.cut.setupReads(false)
			if err != nil {
				t.Fatal(err)
			}
			if n, _ := l.HoldCount(inner); n != 2 {
				t.Fatalf("hold count %d, want 2", n)
			}
			ttl := e.loseByLostReplies(t, inner, "*"+key+"*")
			e.heal()
			healed := time.Now()
			// A writer waits for a lost reader; otherwise the same kind.
			wk := k
			if k.name == "read" {
				wk = kindByName("write")
			}
			w := wk.new(e.other, key, runtime.LockOptions{})
			// The wait bounds the try; the hold's ctx has no deadline of
			// its own (one made it end on a loaded box before the check
			// below, which read that as the Unlocks ending it).
			h2, err := w.TryLock(ctx, givenBackWithin(ttl), runtime.Watchdog)
			if err != nil {
				t.Fatalf("the next owner did not get the lock within %v of Redis answering (TTL at the loss %v): %v", givenBackWithin(ttl), ttl, err)
			}
			t.Logf("the next owner got the lock %v after Redis answered again (TTL at the loss %v)", time.Since(healed).Round(time.Millisecond), ttl)
			if left := e.direct.Keys(ctx, "*rwlock_timeout*").Val(); len(left) != 0 {
				t.Fatalf("timeout keys of the lost read holds left: %v", left)
			}
			for _, c := range []context.Context{inner, outer} {
				if err := l.Unlock(c); !errors.Is(err, runtime.ErrLockLost) {
					t.Fatalf("Unlock of a lost hold = %v, want ErrLockLost", err)
				}
			}
			if err := context.Cause(h2); err != nil {
				t.Fatalf("the lost holds' Unlocks ended the next owner's hold: %v", err)
			}
			if err := w.Unlock(h2); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A reader lost at its deadline shares the read lock with a reader of
// another Client that is alive: the give-back removes the lost reader's
// field and timeout key only. The other reader keeps the lock (a waiting
// writer does not get it, the hash keeps a TTL), and the writer gets it
// once that reader leaves.
// setupWait is the wait of a test's first acquisitions of a free lock: a
// wait only bounds them by more than a single try's ReleaseTimeout (300
// ms), which their first calls (dial, HELLO, NOSCRIPT, SCRIPT LOAD
// through the proxy) overran on a loaded box: "acquire: redis
// unavailable: outcome unknown".
const setupWait = 5 * time.Second

func TestGiveBackOfAReaderLeavesTheOtherReaders(t *testing.T) {
	skipShortOutsideCI(t)
	t.Parallel()
	e := newGBEnv(t, 3*time.Second, nil)
	ctx := context.Background()
	key := "gb:readers"
	lost, err := e.holder.ReadWrite(key, runtime.LockOptions{}).Read().TryLock(ctx, setupWait, runtime.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	alive := e.other.ReadWrite(key, runtime.LockOptions{}).Read()
	actx, err := alive.TryLock(ctx, setupWait, runtime.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	timeoutKeys := func() []string { return e.direct.Keys(ctx, "*rwlock_timeout*").Val() }
	if n := len(timeoutKeys()); n != 2 {
		t.Fatalf("%d timeout keys, want 2", n)
	}
	// The lost reader's own timeout key: the live reader's renewals move
	// the hash's TTL and its own key.
	e.loseByLostRepliesTTL(t, lost, key, e.longestTTL("*"+key+"*"+e.holder.ID()+"*"))
	e.heal()
	eventually(t, e.wd, "the lost reader's timeout key given back", func() bool { return len(timeoutKeys()) == 1 })
	if tk := timeoutKeys()[0]; strings.Contains(tk, e.holder.ID()) {
		t.Fatalf("the timeout key left is the lost reader's: %s", tk)
	}
	if n, _ := alive.HoldCount(actx); n != 1 {
		t.Fatalf("the live reader's count in Redis is %d, want 1", n)
	}
	if ttl := e.direct.PTTL(ctx, key).Val(); ttl <= 0 {
		t.Fatalf("the read lock's TTL is %v with a live reader", ttl)
	}
	wr := e.other.ReadWrite(key, runtime.LockOptions{}).Write()
	if _, err := wr.TryLock(ctx, 200*time.Millisecond, runtime.Watchdog); !errors.Is(err, runtime.ErrNotAcquired) {
		t.Fatalf("a writer's TryLock = %v while a reader holds the lock, want ErrNotAcquired", err)
	}
	if err := context.Cause(actx); err != nil {
		t.Fatalf("the live reader's hold ended: %v", err)
	}
	if err := alive.Unlock(actx); err != nil {
		t.Fatal(err)
	}
	wctx, err := wr.TryLock(ctx, e.wd, runtime.Watchdog)
	if err != nil {
		t.Fatalf("the writer did not get the lock once the last live reader left: %v", err)
	}
	if err := wr.Unlock(wctx); err != nil {
		t.Fatal(err)
	}
}

// A permit lost at its deadline is freed exactly once: by the give-back,
// with another holder's permit left alone; the lost hold's Release frees
// nothing more.
func TestGiveBackFreesALostPermitOnce(t *testing.T) {
	skipShortOutsideCI(t)
	t.Parallel()
	e := newGBEnv(t, 3*time.Second, nil)
	ctx := context.Background()
	key := "gb:permits"
	opts := runtime.SemaphoreOptions{Permits: 3}
	mine := e.holder.Semaphore(key, opts)
	lost, err := mine.TryAcquire(ctx, 2, setupWait)
	if err != nil {
		t.Fatal(err)
	}
	// A permit's lease is its score in the timeout set (server ms).
	ttl := e.loseByLostRepliesTTL(t, lost, key, func(ctx context.Context) time.Duration {
		now := e.direct.Time(ctx).Val()
		zs := e.direct.ZRangeWithScores(ctx, "{"+key+"}:timeout", -1, -1).Val()
		if len(zs) == 0 {
			return 0
		}
		return time.UnixMilli(int64(zs[0].Score)).Sub(now)
	})
	theirs := e.other.Semaphore(key, opts)
	tctx, err := theirs.TryAcquire(ctx, 1, setupWait)
	if err != nil {
		t.Fatal(err)
	}
	e.heal()
	eventually(t, givenBackWithin(ttl), "the lost permits freed", func() bool {
		n, err := theirs.Available(ctx)
		return err == nil && n == 2
	})
	if err := mine.Release(lost); !errors.Is(err, runtime.ErrLockLost) {
		t.Fatalf("Release of the lost permits = %v, want ErrLockLost", err)
	}
	// Past the lost permits' own expiry: still freed once.
	time.Sleep(ttl)
	if n, _ := theirs.Available(ctx); n != 2 {
		t.Fatalf("%d permits free with one of three held, want 2", n)
	}
	if err := context.Cause(tctx); err != nil {
		t.Fatalf("the other holder's permit was lost: %v", err)
	}
	if err := theirs.Release(tctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := theirs.Available(ctx); n != 3 {
		t.Fatalf("%d permits free after every release, want 3", n)
	}
}

// Close at about the instant the clock ends a watchdog hold (replies lost,
// so the give-back starts and cannot finish) returns without a WaitGroup
// misuse, ends the give-back, and leaves no goroutine behind. Run it with
// -race and -count.
func TestCloseRacingALossAtTheDeadlineEndsTheGiveBack(t *testing.T) {
	skipShortOutsideCI(t)
	s := redistest.Start(t)
	ignore := goleak.IgnoreCurrent()
	const wd = 300 * time.Millisecond
	for i := range 12 {
		p, err := faultproxy.New(s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), ReadTimeout: 100 * time.Millisecond, MaxRetries: -1})
		c, err := runtime.NewClient(rdb, &runtime.Options{WatchdogTimeout: wd, ReleaseTimeout: 200 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		var held context.Context
		if i%2 == 0 {
			held, err = c.Mutex(fmt.Sprintf("gb:close:%d", i), runtime.LockOptions{}).TryLock(ctx, 0, runtime.Watchdog)
		} else {
			held, err = c.Semaphore(fmt.Sprintf("gb:close:%d", i), runtime.SemaphoreOptions{Permits: 1}).TryAcquire(ctx, 1, 0)
		}
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(wd/3 + wd/10)
		p.Blackhole(faultproxy.Downstream)
		// The deadline is about wd after the last confirmed renewal;
		// Close lands from a little before to a little after it.
		time.Sleep(wd - wd/3 + time.Duration(i-6)*10*time.Millisecond)
		closed := make(chan struct{})
		go func() {
			_ = c.Close()
			close(closed)
		}()
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			t.Fatal("Close did not return")
		}
		if held.Err() == nil {
			t.Fatal("a hold's ctx outlived Close")
		}
		_ = rdb.Close()
		_ = p.Close()
	}
	verifyNoLeak(t, ignore)
}

// With go-redis' default options (ReadTimeout 3s, MaxRetries 3, RESP3
// with HELLO, ctx deadlines not honoured), a hold lost at its deadline is
// given back once the network heals, well before what the renewals that
// arrived set runs out. With the network still cut, the lost hold's Unlock
// and the Client's Close each end within a read timeout of their own
// bound.
func TestGiveBackWithDefaultRedisOptions(t *testing.T) {
	skipShortOutsideCI(t)
	t.Parallel()
	const wd = 9 * time.Second // renewals every 3 s: a read timeout of go-redis apart
	t.Run("healed", func(t *testing.T) {
		t.Parallel()
		e := newGBEnv(t, wd, &redis.Options{})
		ctx := context.Background()
		key := "gb:defaults:healed"
		held, err := e.holder.Mutex(key, runtime.LockOptions{}).TryLock(ctx, setupWait, runtime.Watchdog)
		if err != nil {
			t.Fatal(err)
		}
		ttl := e.loseByLostReplies(t, held, key)
		e.heal()
		healed := time.Now()
		wctx, cancel := context.WithTimeout(ctx, ttl)
		defer cancel()
		w := e.other.Mutex(key, runtime.LockOptions{})
		h2, err := w.TryLock(wctx, ttl, runtime.Watchdog)
		if err != nil {
			t.Fatal(err)
		}
		took := time.Since(healed)
		t.Logf("the next owner got the lock %v after Redis answered again (TTL at the loss %v)", took.Round(time.Millisecond), ttl)
		if took > ttl-time.Second {
			t.Fatalf("the next owner got the lock %v after the heal, TTL at the loss %v: it waited out the lease, nothing was given back", took, ttl)
		}
		if err := w.Unlock(h2); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("cut", func(t *testing.T) {
		t.Parallel()
		e := newGBEnv(t, wd, &redis.Options{})
		ctx := context.Background()
		key := "gb:defaults:cut"
		l := e.holder.Mutex(key, runtime.LockOptions{})
		held, err := l.TryLock(ctx, setupWait, runtime.Watchdog)
		if err != nil {
			t.Fatal(err)
		}
		e.loseByLostReplies(t, held, key)
		time.Sleep(100 * time.Millisecond) // the give-back is in its first attempt
		start := time.Now()
		if err := e.holder.Close(); err != nil {
			t.Fatal(err)
		}
		t.Logf("Close with the give-back under way and Redis cut off took %v", time.Since(start).Round(time.Millisecond))
		start = time.Now()
		if err := l.Unlock(held); !errors.Is(err, runtime.ErrLockLost) {
			t.Fatalf("Unlock of the lost hold = %v, want ErrLockLost", err)
		}
		t.Logf("Unlock of the lost hold with Redis cut off took %v", time.Since(start).Round(time.Millisecond))
	})
}

// On a Redis Cluster (every node behind a proxy, the holder's cluster
// client dialling through them), a hold lost at its deadline with replies
// lost is given back once the nodes answer again.
func TestGiveBackOnCluster(t *testing.T) {
	skipShortOutsideCI(t)
	t.Parallel()
	cl := redistest.StartCluster(t)
	via := map[string]string{}
	var proxies []*faultproxy.Proxy
	for _, n := range cl.Nodes() {
		p := faultproxy.Start(t, n.Addr())
		via[n.Addr()] = p.Addr()
		proxies = append(proxies, p)
	}
	var d net.Dialer
	cut := newRenewalCut(proxies...)
	pc := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:       cl.Addrs(),
		ReadTimeout: 200 * time.Millisecond,
		MaxRetries:  -1,
		Dialer: cut.dialer(func(ctx context.Context, network, addr string) (net.Conn, error) {
			if p, ok := via[addr]; ok {
				addr = p
			}
			return d.DialContext(ctx, network, addr)
		}),
	})
	t.Cleanup(func() { _ = pc.Close() })
	const wd = 3 * time.Second
	direct := cl.Client(t)
	holder := newClient(t, pc, &runtime.Options{WatchdogTimeout: wd, ReleaseTimeout: 300 * time.Millisecond})
	other := newClient(t, direct, &runtime.Options{WatchdogTimeout: wd})
	e := &gbEnv{ps: proxies, cut: cut, direct: direct, wd: wd}
	ctx := context.Background()
	for _, k := range []lockKind{kindByName("reentrant"), kindByName("fair")} {
		key := "gb:cluster:{" + k.name + "}"
		cut.setupReads(true)
		held, err := k.new(holder, key, runtime.LockOptions{}).TryLock(ctx, setupWait, runtime.Watchdog)
		cut.setupReads(false)
		if err != nil {
			t.Fatal(err)
		}
		ttl := e.loseByLostRepliesTTL(t, held, key, func(ctx context.Context) time.Duration { return direct.PTTL(ctx, key).Val() })
		e.heal()
		healed := time.Now()
		wctx, cancel := context.WithTimeout(ctx, givenBackWithin(ttl))
		w := k.new(other, key, runtime.LockOptions{})
		h2, err := w.TryLock(wctx, givenBackWithin(ttl), runtime.Watchdog)
		cancel()
		if err != nil {
			t.Fatalf("%s: the next owner did not get the lock within %v of the nodes answering (TTL at the loss %v): %v", k.name, givenBackWithin(ttl), ttl, err)
		}
		t.Logf("%s: the next owner got the lock %v after the nodes answered again (TTL at the loss %v)", k.name, time.Since(healed).Round(time.Millisecond), ttl)
		if err := w.Unlock(h2); err != nil {
			t.Fatal(err)
		}
	}
}

// A RedLock whose part on one of three nodes is lost at its deadline (that
// node's replies lost) stays held on the other two: the give-back removes
// the lost part from its node only, the hold's ctx goes on, the lock is
// still refused to others, and Unlock releases the rest.
func TestGiveBackOfOneRedLockPartKeepsTheQuorum(t *testing.T) {
	skipShortOutsideCI(t)
	t.Parallel()
	const wd = 3 * time.Second
	servers := redistest.StartN(t, 3)
	var proxied, direct []redis.UniversalClient
	var cutp *faultproxy.Proxy
	var cut *renewalCut
	for i, s := range servers {
		p := faultproxy.Start(t, s.Addr())
		o := &redis.Options{Addr: p.Addr(), ReadTimeout: 200 * time.Millisecond, MaxRetries: -1}
		if i == 0 {
			cutp, cut = p, newRenewalCut(p)
			o.Dialer = cut.dialer(nil)
		}
		pc := redis.NewClient(o)
		t.Cleanup(func() { _ = pc.Close() })
		proxied = append(proxied, pc)
		direct = append(direct, s.Client(t))
	}
	lostLog := make(chan struct{}, 8)
	holder := newClient(t, proxied[0], &runtime.Options{WatchdogTimeout: wd, RedLockNodes: proxied, ReleaseTimeout: 300 * time.Millisecond,
		Logger: slog.New(lossLog(lostLog))})
	other := newClient(t, direct[0], &runtime.Options{WatchdogTimeout: wd, RedLockNodes: direct})
	ctx := context.Background()
	key := "gb:red"
	l := holder.RedLock(key, runtime.LockOptions{})
	cut.setupReads(true)
	held, err := l.TryLock(ctx, setupWait, runtime.Watchdog)
	cut.setupReads(false)
	if err != nil {
		t.Fatal(err)
	}
	e := &gbEnv{ps: []*faultproxy.Proxy{cutp}, direct: direct[0], wd: wd}
	cut.atNextRenewal(t, key, wd, func(ctx context.Context) time.Duration { return direct[0].PTTL(ctx, key).Val() })
	// The part's node Client logs its loss (a RedLock's node Clients have
	// no Observer).
	select {
	case <-lostLog:
	case <-time.After(2 * wd):
		t.Fatal("the part on the cut node outlived its deadline")
	}
	ttl := direct[0].PTTL(ctx, key).Val()
	if ttl <= 0 {
		t.Fatalf("TTL on the cut node %v at the loss: what the renewal that arrived set ran out before the part was lost", ttl)
	}
	e.heal()
	eventually(t, givenBackWithin(ttl), "the lost part given back on its node", func() bool {
		return direct[0].Exists(ctx, key).Val() == 0
	})
	for i := 1; i < 3; i++ {
		if direct[i].Exists(ctx, key).Val() != 1 {
			t.Fatalf("node %d lost the part of a hold that keeps its quorum", i)
		}
	}
	if _, err := other.RedLock(key, runtime.LockOptions{}).TryLock(ctx, 0, runtime.Watchdog); !errors.Is(err, runtime.ErrNotAcquired) {
		t.Fatalf("another owner's TryLock = %v while the quorum holds, want ErrNotAcquired", err)
	}
	if err := context.Cause(held); err != nil {
		t.Fatalf("the RedLock hold ended: %v", err)
	}
	if err := l.Unlock(held); err != nil {
		t.Fatalf("Unlock with the quorum kept = %v", err)
	}
	for i := range 3 {
		if direct[i].Exists(ctx, key).Val() != 0 {
			t.Fatalf("node %d still has the lock after Unlock", i)
		}
	}
}

// lossLog is a slog handler that signals lost on every "lock lost" record.
type lossLog chan<- struct{}

func (h lossLog) Enabled(context.Context, slog.Level) bool { return true }
func (h lossLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h lossLog) WithGroup(string) slog.Handler            { return h }
func (h lossLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "lock lost" {
		select {
		case h <- struct{}{}:
		default:
		}
	}
	return nil
}

// The Unlock of a hold lost at its deadline sends nothing: with Redis cut
// off it returns ErrLockLost at once, with go-redis' default options too,
// rather than wait for the give-back's turn and re-read the hold itself.
func TestUnlockOfAHoldLostAtItsDeadlineDoesNotWaitForRedis(t *testing.T) {
	skipShortOutsideCI(t)
	t.Parallel()
	e := newGBEnv(t, 3*time.Second, &redis.Options{})
	ctx := context.Background()
	l := e.holder.Mutex("gb:unlock:cut", runtime.LockOptions{})
	held, err := l.TryLock(ctx, setupWait, runtime.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	e.loseByLostReplies(t, held, "gb:unlock:cut")
	time.Sleep(100 * time.Millisecond) // the give-back is in its first attempt
	start := time.Now()
	if err := l.Unlock(held); !errors.Is(err, runtime.ErrLockLost) {
		t.Fatalf("Unlock of the lost hold = %v, want ErrLockLost", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("Unlock of the lost hold took %v with Redis cut off (ReleaseTimeout 300ms): it sends nothing, it should not wait", took)
	}
}
