package runtime

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/hub"
	"github.com/lockgen/lockgen/runtime/internal/leaseclock"
	"github.com/lockgen/lockgen/runtime/internal/lockenv"
	"github.com/lockgen/lockgen/runtime/internal/mutex"
)

// RedLock is a lock over independent Redis masters (Options.RedLockNodes),
// held when a quorum of them (a majority by default) grant it: the RedLock
// algorithm. On every node the lock is a reentrant lock with Redisson's
// layout, taken with the same owner token.
//
// An acquisition tries every node in parallel once; it holds the lock when
// at least a quorum granted it and the validity left (lease − time spent −
// drift of 1% + 5ms) is positive. Otherwise it releases what it got and,
// while the wait time lasts, tries again: after a short random pause when
// the vote split (another waiter got some nodes), else once a release on
// any node wakes it (it sleeps on the lock's channel of every node, as a
// lock's waiter does on one; key tracking sees a lock freed by expiry). With
// the watchdog lease each node's hold is renewed by that node's watchdog;
// the hold's ctx is cancelled with ErrLockLost once fewer than a quorum of
// nodes still hold it. A fixed-lease hold's ctx ends when its validity does.
//
// Redisson deprecated RedLock: its safety rests on bounded clock drift and
// process pauses, which the algorithm cannot check. See the README for what
// fencing tokens and WAIT add.
type RedLock struct {
	c      *Client
	key    string
	opts   LockOptions
	quorum int
}

// Key is the Redis key of the lock on every node.
func (l *RedLock) Key() string { return l.key }

func (l *RedLock) fail(op string, err error) error {
	return &LockError{Op: op, Name: l.opts.Name, Key: l.key, Err: err}
}

// redHold is one acquisition of a RedLock.
type redHold struct {
	owner string
	spare int // parts that may be lost before the quorum is lost

	parts  []context.Context // the hold ctx on each node; nil where not taken
	stops  []func() bool     // stop the loss watchers
	cancel context.CancelCauseFunc
	start  time.Time

	mu       sync.Mutex
	released bool
	lost     int
}

type redKey struct {
	c   *Client
	key string
}

func (l *RedLock) holdIn(ctx context.Context) *redHold {
	h, _ := ctx.Value(redKey{l.c, l.key}).(*redHold)
	return h
}

// Lock waits until it holds the lock on a quorum or ctx is done.
func (l *RedLock) Lock(ctx context.Context) (context.Context, error) {
	return l.TryLock(ctx, Forever, l.opts.Lease)
}

// TryLock waits up to wait for a quorum of nodes to grant the lock, with
// lease (Watchdog or fixed). It fails with ErrQuorum when fewer than a
// quorum of nodes answer at all, and with ErrNotAcquired when they answer
// but others hold the lock for the whole wait.
func (l *RedLock) TryLock(ctx context.Context, wait, lease time.Duration) (hctx context.Context, err error) {
	c := l.c
	owner, begin := "", time.Now()
	defer func() { observeTry(c.opts.Observer, ctx, l.opts.Name, l.key, "red", owner, begin, err) }()
	if err := l.check(lease); err != nil {
		return nil, err
	}
	owner = l.ownerOf(ctx)
	effective := lease
	if lease == Watchdog {
		effective = c.opts.WatchdogTimeout
	}
	var deadline time.Time
	if wait >= 0 {
		deadline = time.Now().Add(wait)
	}
	var rw *redWait // its place on the nodes' channels, once it waited
	defer func() {
		if rw != nil {
			rw.leave(err == nil)
		}
	}()
	for {
		start := time.Now()
		until := time.Time{} // a single try of each node: bounded by the release timeout
		if wait > 0 {
			until = deadline
		}
		parts, answered := l.tryAll(ctx, owner, lease, until)
		if rw != nil {
			rw.tried()
		}
		granted := 0
		for _, p := range parts {
			if p != nil {
				granted++
			}
		}
		// Every node's key expires no earlier than start + lease: the
		// validity ends a drift before that, whatever the tries cost
		// (that time is already inside the window, not to subtract again).
		validUntil := start.Add(effective - leaseclock.Drift(effective))
		if granted >= l.quorum && time.Now().Before(validUntil) {
			return l.hold(ctx, owner, parts, granted, lease, validUntil), nil
		}
		l.releaseParts(parts)
		switch {
		case ctx.Err() != nil:
			return nil, l.fail("acquire", ctx.Err())
		case answered < l.quorum:
			return nil, l.fail("acquire", fmt.Errorf("%w: %d of %d nodes answered, %d needed", ErrQuorum, answered, len(parts), l.quorum))
		case wait == 0 || !deadline.IsZero() && !time.Now().Before(deadline):
			return nil, l.fail("acquire", fmt.Errorf("%w: %d of %d nodes granted it, %d needed", ErrNotAcquired, granted, len(parts), l.quorum))
		}
		if granted > 0 {
			// A split vote: another waiter took some nodes. Back off a
			// random while, as RedLock prescribes, so that two waiters do
			// not split every round, and try again.
			if err := l.pause(ctx, time.Duration(1+rand.IntN(20))*time.Millisecond, deadline); err != nil {
				return nil, err
			}
			continue
		}
		// Held elsewhere: sleep on every node's lock channel until a
		// release there (or the key's deletion or expiry: key tracking)
		// wakes it, then try again.
		if rw == nil {
			var ready bool
			if rw, ready = l.join(); rw == nil {
				return nil, l.fail("acquire", ErrClosed)
			}
			if ready {
				continue
			}
		}
		if err := l.pause(ctx, c.redSleep, deadline, rw.ws...); err != nil {
			return nil, err
		}
	}
}

// check refuses a TryLock that cannot work: no nodes, a quorum of more
// than them, a bad key or lease, a closed Client.
func (l *RedLock) check(lease time.Duration) error {
	c := l.c
	switch {
	case len(c.redNodes) == 0:
		return l.fail("acquire", fmt.Errorf("%w: no RedLock nodes (set Options.RedLockNodes)", ErrInvalidArgument))
	case l.quorum > len(c.redNodes):
		return l.fail("acquire", fmt.Errorf("%w: quorum %d is more than the %d nodes", ErrInvalidArgument, l.quorum, len(c.redNodes)))
	}
	if err := lockenv.Validate(l.key, lease); err != nil {
		return l.fail("acquire", err)
	}
	if c.isClosed() {
		return l.fail("acquire", ErrClosed)
	}
	return nil
}

// ownerOf is the owner an acquisition with ctx takes the lock as: the one
// of a RedLock hold or another hold of the Client that ctx carries (a
// re-entry), or a new one.
func (l *RedLock) ownerOf(ctx context.Context) string {
	if h := l.holdIn(ctx); h != nil {
		return h.owner
	}
	if hc := l.c.env.Reg.Of(ctx); hc != nil {
		return hc.Owner()
	}
	return l.c.env.NewOwner()
}

// redSleepBound bounds a RedLock waiter's sleep on the nodes' channels: a
// lock freed without a message (its holder crashed) is seen by key
// tracking, or after this.
const redSleepBound = 500 * time.Millisecond

// pause sleeps up to d, never past deadline (zero: none), until one of ws
// is signalled, ctx is done or the Client closes.
func (l *RedLock) pause(ctx context.Context, d time.Duration, deadline time.Time, ws ...*hub.Waiter) error {
	if !deadline.IsZero() {
		d = max(min(d, time.Until(deadline)), 0)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	cases := []reflect.SelectCase{
		{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(t.C)},
		{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())},
		{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(l.c.closeCh)},
	}
	for _, w := range ws {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(w.C())})
	}
	switch i, _, _ := reflect.Select(cases); i {
	case 1:
		return l.fail("acquire", ctx.Err())
	case 2:
		return l.fail("acquire", ErrClosed)
	}
	return nil
}

// redWait is a RedLock waiter's place on the lock's channel of every node.
type redWait struct {
	nodes []*Client
	ws    []*hub.Waiter
}

// join puts a waiter on the lock's channel of every node. ready: one of
// the channels was subscribed already, so an unlock published since the
// last try may have reached no one: try again at once. It returns nil once
// a node's Client is closed.
func (l *RedLock) join() (rw *redWait, ready bool) {
	rw = &redWait{nodes: l.c.redNodes}
	for _, n := range rw.nodes {
		w, r := n.env.Hub.Join(mutex.LockChannel(l.key), false, hub.Sub{Key: l.key})
		if w == nil {
			rw.leave(false)
			return nil, false
		}
		rw.ws = append(rw.ws, w)
		ready = ready || r
	}
	return rw, ready
}

// tried reports a round of tries to every node's hub.
func (rw *redWait) tried() {
	for i, w := range rw.ws {
		rw.nodes[i].env.Hub.Tried(w, false, false)
	}
}

// leave takes the waiter off every node's channel (acquired: its unused
// wake-ups are dropped rather than passed on).
func (rw *redWait) leave(acquired bool) {
	for i, w := range rw.ws {
		rw.nodes[i].env.Hub.Leave(w, acquired)
	}
}

// tryAll tries every node once, in parallel. answered counts the nodes
// that replied (granted or held by someone else), as opposed to failing.
func (l *RedLock) tryAll(ctx context.Context, owner string, lease time.Duration, until time.Time) (parts []context.Context, answered int) {
	nodes := l.c.redNodes
	parts = make([]context.Context, len(nodes))
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			parts[i], errs[i] = n.Mutex(l.key, l.opts).acquireAs(ctx, owner, 0, lease, until)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err == nil || errors.Is(err, ErrNotAcquired) {
			answered++
		}
	}
	return parts, answered
}

func (l *RedLock) releaseParts(parts []context.Context) {
	var wg sync.WaitGroup
	for i, p := range parts {
		if p == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = l.c.redNodes[i].Mutex(l.key, l.opts).Unlock(p)
		}()
	}
	wg.Wait()
}

// hold makes the ctx of a granted acquisition. It is cancelled with
// ErrLockLost when more nodes lose their part than the quorum can spare,
// or (fixed lease) when the validity ends.
func (l *RedLock) hold(ctx context.Context, owner string, parts []context.Context, granted int, lease time.Duration, validUntil time.Time) context.Context {
	h := &redHold{owner: owner, parts: parts, start: time.Now(), spare: granted - l.quorum}
	cctx, cancel := context.WithCancelCause(ctx)
	h.cancel = cancel
	var out context.Context = cctx
	if lease != Watchdog {
		dctx, stop := context.WithDeadlineCause(cctx, validUntil, l.fail("lease", fmt.Errorf("%w: validity of the fixed lease ran out", ErrLockLost)))
		out = dctx
		h.cancel = func(err error) { cancel(err); stop() }
	}
	for _, p := range parts {
		if p == nil {
			continue
		}
		h.stops = append(h.stops, context.AfterFunc(p, func() {
			if cause := context.Cause(p); errors.Is(cause, ErrClosed) {
				h.cancel(l.fail("renew", ErrClosed))
				return
			} else if !errors.Is(cause, ErrLockLost) {
				return
			}
			h.mu.Lock()
			h.lost++
			lostQuorum := h.lost > h.spare && !h.released
			h.mu.Unlock()
			if lostQuorum {
				h.cancel(l.fail("renew", fmt.Errorf("%w: fewer than %d nodes still hold it", ErrLockLost, l.quorum)))
			}
		}))
	}
	return context.WithValue(out, redKey{l.c, l.key}, h)
}

// Unlock releases the acquisition ctx carries on every node.
func (l *RedLock) Unlock(ctx context.Context) error {
	h := l.holdIn(ctx)
	if h == nil {
		return l.fail("release", fmt.Errorf("%w: ctx carries no acquisition of this lock", ErrNotHeld))
	}
	h.mu.Lock()
	released, lost := h.released, h.lost > h.spare
	h.released = true
	h.mu.Unlock()
	if released {
		return l.fail("release", fmt.Errorf("%w: already released", ErrNotHeld))
	}
	for _, stop := range h.stops {
		stop()
	}
	h.cancel(context.Canceled) // before the releases are sent (see Mutex.Unlock)
	l.releaseParts(h.parts)
	observeRelease(l.c.opts.Observer, ctx, l.opts.Name, l.key, "red", h.owner, h.start)
	if lost {
		return l.fail("release", fmt.Errorf("%w: fewer than %d nodes held it", ErrLockLost, l.quorum))
	}
	return nil
}

// Do acquires the lock with the RedLock's options, runs fn with the ctx of
// the hold, and releases it when fn returns or panics.
func (l *RedLock) Do(ctx context.Context, fn func(ctx context.Context) error) (err error) {
	if fn == nil {
		return l.fail("acquire", fmt.Errorf("%w: nil fn", ErrInvalidArgument))
	}
	return do(ctx, l, l.opts, fn)
}
