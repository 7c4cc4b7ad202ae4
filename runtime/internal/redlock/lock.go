package redlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/await"
	"github.com/lockgen/lockgen/runtime/internal/errs"
	"github.com/lockgen/lockgen/runtime/internal/hub"
	"github.com/lockgen/lockgen/runtime/internal/leaseclock"
	"github.com/lockgen/lockgen/runtime/internal/lockenv"
	"github.com/lockgen/lockgen/runtime/internal/mutex"
	"github.com/lockgen/lockgen/runtime/internal/scripts"
)

// A Lock is the engine of one RedLock handle: a reentrant lock on every node. It is safe for concurrent use.
type Lock struct {
	env    *lockenv.Env // the Client's own: owners, errors, Close
	live   *Holds       // the Client's RedLock holds
	key    string
	name   string
	quorum int
	nodes  []node
	// SleepBound bounds a waiter's sleep on the nodes' channels: a lock
	// freed without a message is seen by key tracking, or after this
	// (exported for tests, which set it past their wait).
	SleepBound time.Duration
}

// node is the lock on one node, in that node's Client.
type node struct {
	hub  *hub.Hub
	lock mutex.Lock
}

// New returns the RedLock at key over nodes (each node Client's Env),
// held on quorum of them (0: a majority), with o on each node.
func New(env *lockenv.Env, live *Holds, nodes []*mutex.Env, key string, quorum int, o mutex.Options) *Lock {
	if quorum == 0 {
		quorum = len(nodes)/2 + 1
	}
	l := &Lock{env: env, live: live, key: key, name: o.Name, quorum: quorum, nodes: make([]node, len(nodes)), SleepBound: SleepBound}
	for i, n := range nodes {
		l.nodes[i].hub = n.Hub
		l.nodes[i].lock.Init(n, key, mutex.Reentrant, o)
	}
	return l
}

// Key is the Redis key of the lock on every node.
func (l *Lock) Key() string { return l.key }

// Nodes is the number of nodes; Quorum how many must grant the lock.
func (l *Lock) Nodes() int  { return len(l.nodes) }
func (l *Lock) Quorum() int { return l.quorum }

func (l *Lock) fail(op string, err error) error { return l.env.Fail(op, l.name, l.key, err) }

// Owner is the owner of the hold of the Client ctx carries (a re-entry), or a new one.
func (l *Lock) Owner(ctx context.Context) string {
	if h := l.holdIn(ctx); h != nil {
		return h.owner
	}
	if hc := l.env.Reg.Of(ctx); hc != nil {
		return hc.Owner()
	}
	return l.env.NewOwner()
}

// Acquire waits up to wait (0: one round of tries; < 0: until ctx is
// done) for a quorum of nodes to grant the lock to owner, with lease, and
// returns the hold's ctx.
func (l *Lock) Acquire(ctx context.Context, owner string, wait, lease time.Duration) (_ context.Context, err error) {
	l.env.Acquiring.Add(1)
	defer l.env.Acquiring.Add(-1)
	running := l.env.Waits.Running(ctx)
	if err := l.env.Waits.Refused(running); err != nil {
		return nil, l.fail("acquire", err)
	}
	effective := lease
	if lease == lockenv.Watchdog {
		effective = l.env.Watchdog
	}
	var deadline, until time.Time // until zero: each node's try is bounded by the release timeout
	if wait >= 0 {
		deadline = time.Now().Add(wait)
	}
	if wait > 0 {
		until = deadline
	}
	var ws []*hub.Waiter // its place on the nodes' channels, once it waited
	defer func() { l.leave(ws, err == nil) }()
	heard := false // a quorum of nodes answered a round
	backoff := await.UnreachableBackoff
	validity := effective - leaseclock.Drift(effective)
	for {
		parts, granted, answered, first, lasting := l.tryAll(ctx, owner, lease, until, validity)
		// A quorum that answered that the lock was held, and a last round
		// cut short by the end of the wait: the lock was held as far as
		// anyone knows (as await reports a waiter's last try cut so).
		past := wait == 0 || !deadline.IsZero() && !time.Now().Before(deadline)
		lastCut := past && heard
		heard = heard || answered >= l.quorum
		for i, w := range ws {
			l.nodes[i].hub.Tried(w, false, false)
		}
		// Every granted node's key expires no earlier than a lease after
		// its try was sent: the validity ends a drift before that, from
		// the earliest send (not the round's start: a try may wait in its
		// node's admission gate first).
		validUntil := first.Add(validity)
		if live, n := liveParts(parts); n >= l.quorum && time.Now().Before(validUntil) {
			return l.hold(ctx, owner, live, n, lease, validUntil), nil
		}
		l.releaseParts(parts)
		if err := l.roundEnds(ctx, running, past, lastCut, granted, answered, len(parts), lasting); err != nil {
			return nil, err
		}
		switch {
		case answered < l.quorum:
			// Too few nodes answered, for passing reasons (unreachable,
			// refused): they may be back within the wait, so try again
			// after a pause, as a waiter of one server waits out a Redis
			// that does not answer (package await).
			if err := l.pause(ctx, running, backoff, deadline); err != nil {
				return nil, err
			}
			backoff = min(2*backoff, await.MaxUnreachableBackoff)
			continue
		case granted > 0:
			// A split vote: back off a random while, as RedLock
			// prescribes, so that two waiters do not split every round.
			if err := l.pause(ctx, running, time.Duration(1+rand.IntN(20))*time.Millisecond, deadline); err != nil {
				return nil, err
			}
			continue
		}
		// Held elsewhere: sleep on every node's lock channel until a
		// release, or the key's deletion or expiry, wakes it.
		if ws == nil {
			var ready bool
			if ws, ready = l.join(); ws == nil {
				return nil, l.fail("acquire", errs.Closed)
			}
			if ready {
				continue
			}
		}
		if err := l.pause(ctx, running, l.SleepBound, deadline, ws...); err != nil {
			return nil, err
		}
	}
}

// roundEnds is the error that ends Acquire after a round that did not
// win (granted of nodes, answered of them replied; lasting: errors that
// do not pass), or nil when it waits on. past: the wait is over; lastCut:
// a quorum answered an earlier round, so a last round cut short by the
// end of the wait reports the lock held, not a quorum missing.
func (l *Lock) roundEnds(ctx context.Context, running, past, lastCut bool, granted, answered, nodes int, lasting error) error {
	refused := l.env.Waits.Refused(running) // the nodes refused it too
	switch {
	case ctx.Err() != nil:
		return l.fail("acquire", ctx.Err())
	case refused != nil:
		return l.fail("acquire", refused)
	case answered < l.quorum && lasting != nil, past && answered < l.quorum && !lastCut:
		// A node that answered with an error no retry mends
		// (WRONGTYPE, NOPERM, a part of a re-entry gone) ends the call.
		err := fmt.Errorf("%w: %d of %d nodes answered, %d needed", errs.Quorum, answered, nodes, l.quorum)
		if lasting != nil {
			err = fmt.Errorf("%w: %w", err, lasting)
		}
		return l.fail("acquire", err)
	case past:
		return l.fail("acquire", fmt.Errorf("%w: %d of %d nodes granted it, %d needed", errs.NotAcquired, granted, nodes, l.quorum))
	}
	return nil
}

// tryAll tries every node once, in parallel, and decides the round
// without waiting for a minority of slow nodes: once a quorum granted, the
// others are waited for (spare parts) only until a share of the validity
// is spent (stragglerShare), and a round that can no longer win ends once
// a quorum answered (fewer answers wait for the rest: they tell
// errs.Quorum from a lock held). The tries still running then are left to
// giveBackLate. answered counts the nodes that replied (granted or held),
// first is the earliest send of a granted node's try, lasting joins the
// errors of tries that failed for a reason that does not pass (passing).
func (l *Lock) tryAll(ctx context.Context, owner string, lease time.Duration, until time.Time, validity time.Duration) (parts []context.Context, granted, answered int, first time.Time, lasting error) {
	// Buffered: a try that ends after its round was decided never blocks.
	replies := make(chan reply, len(l.nodes))
	for i := range l.nodes {
		go func() { replies <- l.tryNode(ctx, i, owner, lease, until) }()
	}
	parts = make([]context.Context, len(l.nodes))
	var cut <-chan time.Time // once a quorum granted: the others are waited for until then
	left := len(l.nodes)
	// Until every try ended, or the round can no longer win and a quorum answered.
	for ; left > 0 && (answered < l.quorum || granted+left >= l.quorum); left-- {
		var r reply
		select {
		case r = <-replies:
		case <-cut:
			l.giveBackLate(replies, left)
			return parts, granted, answered, first, lasting
		}
		if r.answered {
			answered++
		} else if r.err != nil && !passing(r.err) {
			lasting = errors.Join(lasting, r.err)
		}
		if r.part == nil {
			continue
		}
		parts[r.i] = r.part
		if granted++; first.IsZero() || r.sent.Before(first) {
			first = r.sent
		}
		if granted >= l.quorum {
			cut = time.After(time.Until(first.Add(validity / stragglerShare)))
		}
	}
	if left > 0 {
		l.giveBackLate(replies, left)
	}
	return parts, granted, answered, first, lasting
}

// liveParts are the parts whose ctx is not done, and their number. A
// part may end while its round waits for slower nodes: a Shutdown of the
// Client (a goroutine sharing it) cuts the parts its nodes hold and gives
// them back in Redis, and Holds.Cut, which ends the RedLock holds first,
// does not know this acquisition yet. Such a part holds nothing.
func liveParts(parts []context.Context) ([]context.Context, int) {
	live, n := make([]context.Context, len(parts)), 0
	for i, p := range parts {
		if p != nil && p.Err() == nil {
			live[i] = p
			n++
		}
	}
	return live, n
}

// passing reports whether a node's try failed for a reason that may pass
// within a wait: the node did not answer (or left its outcome unknown,
// which its turn settles: scripts.Unreachable), or refused the call
// before running it.
func passing(err error) bool {
	return errors.Is(err, errs.Unavailable) || scripts.Unreachable(err) || scripts.Refused(err)
}

// stragglerShare: once a quorum granted, a round waits for the other
// nodes until 1/stragglerShare of its validity is spent, and the holder
// keeps the rest. Their parts are spares (a watchdog hold outlives the
// loss of as many), worth a wait for a node a little slower than the
// others (a quarter cut off the first, cold, tries of a loaded box), not
// for one slower than the lease (a node cut off answers only at its
// call's bound).
const stragglerShare = 2

// reply is what one node's try in a round came to.
type reply struct {
	i        int
	part     context.Context // the hold's ctx on the node; nil: not taken
	sent     time.Time       // when the try that took it was sent
	answered bool            // the node replied (granted or held)
	err      error           // why it was not taken, unless held by another
}

// tryNode tries node i once.
func (l *Lock) tryNode(ctx context.Context, i int, owner string, lease time.Duration, until time.Time) reply {
	r := reply{i: i}
	a, err := l.nodes[i].lock.Acquire(ctx, owner, 0, lease, until)
	if err == nil {
		r.sent = a.Sent()
		r.part, err = a.Record()
	}
	r.answered = err == nil || errors.Is(err, errs.NotAcquired)
	if !r.answered {
		r.err = err
	}
	return r
}

// giveBackLate waits, in the background, for the n tries still running
// when their round was decided, and releases what each took: nothing the
// round did not count is left locked. It is counted in the Client's
// Resolving until done, so that Shutdown waits for it: a try's own count
// (Acquiring, on its node) ends before its release is sent.
func (l *Lock) giveBackLate(replies <-chan reply, n int) {
	l.env.Resolving.Add(1)
	go func() {
		defer l.env.Resolving.Add(-1)
		for range n {
			if r := <-replies; r.part != nil {
				_, _, _ = l.nodes[r.i].lock.Release(r.part)
			}
		}
	}()
}

// releaseParts releases the parts taken, on their nodes, in parallel, and
// returns how many were lost (lost before, or found gone by the release).
func (l *Lock) releaseParts(parts []context.Context) int {
	var wg sync.WaitGroup
	var gone atomic.Int32
	for i, p := range parts {
		if p != nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, _, err := l.nodes[i].lock.Release(p); errors.Is(err, errs.LockLost) {
					gone.Add(1)
				}
			}()
		}
	}
	wg.Wait()
	return int(gone.Load())
}

// hold is one acquisition of a RedLock: a hold in each node Client's registry.
type hold struct {
	owner    string
	start    time.Time
	parts    []context.Context // the hold's ctx on each node; nil where not taken
	spare    int32             // parts that may be lost before the quorum is
	lost     atomic.Int32
	released atomic.Bool
	cancel   context.CancelCauseFunc
}

// holdKey is the ctx key of a RedLock's hold: its Client and key.
type holdKey struct {
	env *lockenv.Env
	key string
}

// runningKey marks the ctx of any RedLock hold of a Client (Running).
type runningKey struct{ env *lockenv.Env }

// Running reports whether ctx carries a RedLock hold of the Client of env:
// work running under it, which acquires as running work, not as fresh.
func Running(ctx context.Context, env *lockenv.Env) bool { return ctx.Value(runningKey{env}) != nil }

func (l *Lock) holdIn(ctx context.Context) *hold {
	h, _ := ctx.Value(holdKey{l.env, l.key}).(*hold)
	return h
}

// hold makes the ctx of a granted acquisition (ended as doc.go says, or
// with errs.Closed when a node's Client closes).
func (l *Lock) hold(ctx context.Context, owner string, parts []context.Context, granted int, lease time.Duration, validUntil time.Time) context.Context {
	h := &hold{owner: owner, start: time.Now(), parts: parts, spare: int32(granted - l.quorum)}
	out, cancel := context.WithCancelCause(ctx)
	h.cancel = cancel
	if lease != lockenv.Watchdog {
		var stop context.CancelFunc
		out, stop = context.WithDeadlineCause(out, validUntil, l.fail("lease", fmt.Errorf("%w: validity of the fixed lease ran out", errs.LockLost)))
		h.cancel = func(err error) { cancel(err); stop() }
	}
	for _, p := range parts {
		if p != nil {
			// A part ends when it is released too (cause context.Canceled):
			// by then the hold's ctx is done, and its first cause stays.
			context.AfterFunc(p, func() { l.partEnded(h, context.Cause(p)) })
		}
	}
	l.live.add(h, l, out)
	return context.WithValue(context.WithValue(out, runningKey{l.env}, true), holdKey{l.env, l.key}, h)
}

// Holds are the RedLock holds of a Client, which Shutdown ends (Cut)
// before it cuts their parts: a part's end reaches its hold through a
// goroutine (partEnded), which the give-back of the parts in Redis must
// not outrun.
type Holds struct {
	mu sync.Mutex
	m  map[*hold]*Lock
}

// add keeps h of l until its ctx out is done.
func (s *Holds) add(h *hold, l *Lock, out context.Context) {
	s.mu.Lock()
	if s.m == nil {
		s.m = make(map[*hold]*Lock)
	}
	s.m[h] = l
	s.mu.Unlock()
	context.AfterFunc(out, func() {
		s.mu.Lock()
		delete(s.m, h)
		s.mu.Unlock()
	})
}

// Cut ends every hold left, with a cause wrapping errs.Draining.
func (s *Holds) Cut() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for h, l := range s.m {
		h.cancel(l.fail("shutdown", fmt.Errorf("%w: Shutdown's ctx ended before the hold was released", errs.Draining)))
	}
}

// partEnded ends h when a part's end (cause) makes it lost.
func (l *Lock) partEnded(h *hold, cause error) {
	switch {
	case errors.Is(cause, errs.Closed):
		h.cancel(l.fail("renew", errs.Closed))
	case errors.Is(cause, errs.Draining):
		// A Shutdown cut the part (and gives it back): it cuts the
		// RedLock holds first (Holds.Cut), but not one made after that
		// from parts it had not cut yet.
		h.cancel(l.fail("shutdown", fmt.Errorf("%w: Shutdown's ctx ended before the hold was released", errs.Draining)))
	case errors.Is(cause, errs.LockLost) && h.lost.Add(1) > h.spare:
		h.cancel(l.fail("renew", fmt.Errorf("%w: fewer than %d nodes still hold it", errs.LockLost, l.quorum)))
	}
}

// Release releases the acquisition ctx carries on every node, and returns
// its owner and start (errs.LockLost: fewer than a quorum still held it).
func (l *Lock) Release(ctx context.Context) (owner string, start time.Time, _ error) {
	h := l.holdIn(ctx)
	if h == nil {
		return "", time.Time{}, l.fail("release", fmt.Errorf("%w: ctx carries no acquisition of this lock", errs.NotHeld))
	}
	if h.released.Swap(true) {
		return "", time.Time{}, l.fail("release", fmt.Errorf("%w: already released", errs.NotHeld))
	}
	lost := h.lost.Load() > h.spare
	h.cancel(context.Canceled)
	// Parts found gone count too: keys deleted, or lost in a restart
	// without persistence, under a fixed lease no renewal checks.
	if gone := l.releaseParts(h.parts); lost || int32(gone) > h.spare {
		return h.owner, h.start, l.fail("release", fmt.Errorf("%w: fewer than %d nodes held it", errs.LockLost, l.quorum))
	}
	return h.owner, h.start, nil
}

// SleepBound is the default of Lock.SleepBound.
const SleepBound = 500 * time.Millisecond

// pause sleeps up to d, never past deadline (zero: none), until one of ws
// is signalled, ctx is done, the Client closes, or, but for running work,
// a Shutdown begins.
func (l *Lock) pause(ctx context.Context, running bool, d time.Duration, deadline time.Time, ws ...*hub.Waiter) error {
	drain := l.env.Waits.Draining
	if running {
		drain = nil
	}
	if !deadline.IsZero() {
		d = max(min(d, time.Until(deadline)), 0)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	cases := []reflect.SelectCase{
		{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(t.C)},
		{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())},
		{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(l.env.Waits.Closed)},
		{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(drain)},
	}
	for _, w := range ws {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(w.C())})
	}
	switch i, _, _ := reflect.Select(cases); i {
	case 1:
		return l.fail("acquire", ctx.Err())
	case 2:
		return l.fail("acquire", errs.Closed)
	case 3:
		return l.fail("acquire", l.env.Waits.Refused(false)) // Shutdown began
	}
	return nil
}

// join puts a waiter on the lock's channel of every node (nil once a
// node's Client is closed). ready: a channel was subscribed already, so
// an unlock published since the last try may have reached no one.
func (l *Lock) join() (ws []*hub.Waiter, ready bool) {
	channel := mutex.LockChannel(l.key)
	for i := range l.nodes {
		w, r := l.nodes[i].hub.Join(channel, false, hub.Sub{Key: l.key})
		if w == nil {
			l.leave(ws, false)
			return nil, false
		}
		ws = append(ws, w)
		ready = ready || r
	}
	return ws, ready
}

// leave takes the waiters off every node's channel (acquired: unused wake-ups are dropped).
func (l *Lock) leave(ws []*hub.Waiter, acquired bool) {
	for i, w := range ws {
		l.nodes[i].hub.Leave(w, acquired)
	}
}
