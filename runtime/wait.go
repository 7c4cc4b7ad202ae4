package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime/internal/hub"
	"github.com/lockgen/lockgen/runtime/internal/scripts"
)

// Watchdog and Forever are the special values of LockOptions.
const (
	// Watchdog as a lease: the hold is renewed by the Client's watchdog
	// every WatchdogTimeout/3 for as long as it is held.
	Watchdog time.Duration = 0
	// Forever as a wait time: wait until the ctx is done.
	Forever time.Duration = -1
)

// waitSpec says where and how long to wait.
type waitSpec struct {
	// channel is the channel to sleep on, and key the key whose deletion
	// or expiry frees the lock (the hub watches it; "": none), unless at
	// names them.
	channel, key string
	// at, when set, names channel and key on contention only (building
	// the names costs an allocation the uncontended path does without);
	// a multi-lock's change after each try (dynamic).
	at       waitee
	dynamic  bool          // at may change after each try (multi-lock: the blocking member's)
	shared   bool          // a reader: woken with all readers by a write unlock
	wait     time.Duration // 0: one try; < 0: until ctx is done
	maxSleep time.Duration // bound on one sleep, so the waiter refreshes its place; 0: none
	// queue makes a newcomer let a hand-off in flight in this client finish
	// before its first try (exclusive locks, not a re-entry): in-process
	// FIFO, see hub.Hub.
	queue bool
	// wake is what a message on the channel wakes (see hub.Mode); the
	// zero value is a lock's.
	wake hub.Mode
	// until, when set, is when the whole call this wait is part of must
	// return (a multi-lock's or a RedLock's wait): no try runs past it.
	until time.Time
	// handed, when set, is a waiter that a release can hand the lock to
	// (handoff.go, fair.go, grant.go); nil: none.
	handed handee
	// grants, when set, is a waiter whose tries queue it in Redis for
	// grants from releases of other processes (grant.go); nil: none.
	grants queuer
	// unsettled: a try whose outcome is unknown (ErrOutcomeUnknown) ends
	// the call with that error (and ErrUnavailable). Such a try took what
	// it took and nothing settles it (a plain semaphore's permits have no
	// ids): another try could take as much again, and ErrNotAcquired at
	// the end of the wait would tell the caller that nothing was taken.
	unsettled bool
}

// A waitee names where a waiter sleeps (see waitSpec.at).
type waitee interface {
	waitChannel() string
	waitKey() string
}

// A handee is a waiter that a release can hand the lock to.
type handee interface {
	// grantee returns the owner token and lease argument a local release
	// hands the lock over with ("": not now).
	grantee() (field string, px any)
	// claim takes a lock handed over, or settles a hand-off whose outcome
	// is unknown; when it took the lock, the wait is over as after a
	// successful try.
	claim(state hub.OfferState, marker string, sent time.Time) (bool, error)
	// waitStarted is called when the waiter sleeps without a first try
	// (behind the Client's own waiters): the try would have reported the
	// wait as started.
	waitStarted()
}

// A queuer is a waiter that its tries queue in Redis for grants.
type queuer interface {
	// also is the companion channel subscribed with the waiter's, where
	// releases elsewhere grant this Client's waiters the lock.
	also() string
	// queued reports whether a try queued the waiter in Redis.
	queued() bool
}

// names returns the channel and key of ws.
func (ws *waitSpec) names() (channel, key string) {
	if ws.at != nil {
		return ws.at.waitChannel(), ws.at.waitKey()
	}
	return ws.channel, ws.key
}

// skippedTryBound bounds the first sleep of a waiter that skipped its try
// (see await), in place of the holder's TTL a try would have returned.
const skippedTryBound = 5 * time.Second

// tryFunc makes one acquisition attempt. When the lock is held by someone
// else it reports the holder's remaining lease (negative: no expiry), which
// bounds how long a waiter sleeps: a holder that crashed publishes nothing.
//
// A ttl of ttlWaiterFirst means the lock was not taken although it may be
// free: another waiter goes first (a reader behind a waiting writer). A
// wake-up this waiter used is then handed on to that waiter.
type tryFunc func(ctx context.Context) (acquired bool, ttl time.Duration, err error)

// ttlWaiterFirst: see tryFunc.
const ttlWaiterFirst time.Duration = -2

// await runs the waiting protocol shared by the lock kinds:
//
//  1. if the lock's channel is subscribed already, register on it first,
//     so a wake-up published during the first try is not missed (and, for
//     exclusive locks, let a hand-off in flight finish first);
//  2. try; done if acquired or if wait is 0;
//  3. otherwise join the channel (subscribing on first use); if it was
//     subscribed meanwhile, try again at once, since an unlock published
//     between the try and the join reached no one;
//  4. sleep until a signal, the holder's TTL as this waiter's own latest
//     try returned it, the remaining wait, or ctx done; then try again.
//
// A waiter therefore always tries before it sleeps, and never sleeps on
// what another waiter saw of the lock. A try is never started on a done
// ctx, so a cancelled wait sends nothing.
//
// It returns nil once acquired, an error wrapping ErrNotAcquired when the
// wait time is over, or the ctx's error.
func (c *Client) await(ctx context.Context, ws waitSpec, try tryFunc) (err error) {
	if err := ctx.Err(); err != nil {
		return err
	}
	if c.isClosed() {
		return ErrClosed
	}
	if err := c.refuseFresh(ctx); err != nil {
		return err
	}
	var wt waiting
	wt.init(c, ctx, ws, try)
	defer func() { wt.end(err == nil) }()
	if err := wt.admit(); err != nil { // holds before admissions: overload.go
		return err
	}
	if err := wt.attach(); err != nil {
		return err
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, ttl, err := wt.tryStep()
		switch n {
		case waitDone:
			return err
		case waitTryAgain:
			continue
		}
		if done, err := wt.sleepStep(ttl); done {
			return err
		}
	}
}

// waiting is the state of one call's wait (await) between its steps.
type waiting struct {
	c   *Client
	ctx context.Context
	ws  waitSpec
	try tryFunc
	// deadline is the end of the wait (zero: none); bound is when the
	// call must return: the end of the wait, or the caller's (ws.until)
	// if sooner; a single try gets the release timeout. Every try runs
	// under it, and so does what a try does detached (settling a lost
	// reply): what is left then goes on in the background.
	deadline, bound time.Time
	// drain ends the wait when Shutdown begins: a fresh acquisition's,
	// not one of running work (its ctx carries a hold of this Client).
	drain   <-chan struct{}
	backoff time.Duration // the next pause while Redis does not answer
	replied bool          // a try got an answer from Redis
	w       *hub.Waiter   // the waiter's place in the hub, once attached or joined
	joined  string        // the channel w is on
	timer   *time.Timer   // made on the first sleep: the uncontended path needs none
	skipTry bool          // the next try is skipped: see attach
}

// The next step of a wait, after a try.
const (
	waitSleep    = iota // sleep, then try again
	waitTryAgain        // try again at once
	waitDone            // the wait is over
)

func (wt *waiting) init(c *Client, ctx context.Context, ws waitSpec, try tryFunc) {
	*wt = waiting{c: c, ctx: ctx, ws: ws, try: try, backoff: unreachableBackoff}
	if c.reg.Of(ctx) == nil {
		wt.drain = c.drainCh
	}
	if ws.wait >= 0 {
		wt.deadline = time.Now().Add(ws.wait)
	}
	wt.bound = wt.deadline
	switch {
	case ws.wait == 0:
		wt.bound = time.Now().Add(c.opts.ReleaseTimeout)
	case ws.wait > 0:
		// The last try, at the end of the wait, gets a round trip.
		wt.bound = wt.deadline.Add(lastTryGrace)
	}
	if u := ws.until.Add(lastTryGrace); !ws.until.IsZero() && (wt.bound.IsZero() || u.Before(wt.bound)) {
		wt.bound = u
	}
}

// end leaves the hub and gives the timer back.
func (wt *waiting) end(acquired bool) {
	if wt.timer != nil {
		wt.timer.Stop()
		sleepTimers.Put(wt.timer)
	}
	if wt.w != nil {
		wt.c.hub.Leave(wt.w, acquired)
	}
}

// attach registers the waiter on its channel before the first try, if
// the channel is subscribed already (step 1 of await). Behind this
// Client's own waiters on a lock its releases hand over, the waiter skips
// its first try: its turn comes as a hand-off (or a wake-up), and a try
// now could only fail or overtake them. Otherwise a newcomer lets an
// unlock in transit or a hand-off in flight finish first.
func (wt *waiting) attach() error {
	h, ws := wt.c.hub, wt.ws
	if ws.wait == 0 || ws.dynamic || !h.Active() {
		return nil
	}
	wt.joined, _ = ws.names()
	var deferred bool
	wt.w, deferred = h.Attach(wt.joined, ws.shared, ws.queue)
	grantee := wt.w != nil && ws.handed != nil && h.Grantee(wt.w, ws.handed.grantee)
	switch {
	case deferred && grantee:
		wt.skipTry = true
	case deferred:
		return wt.deferFirstTry()
	}
	return nil
}

// tryStep makes one try (steps 2 and 3 of await) and says what comes
// next: for waitSleep, how long the holder's lease has left (< 0: until
// signalled).
func (wt *waiting) tryStep() (int, time.Duration, error) {
	h, ws := wt.c.hub, wt.ws
	if wt.skipTry {
		wt.skipTry = false
		h.Undefer(wt.w)         // it waits in line now, for offers and wake-ups
		ws.handed.waitStarted() // only a handee skips its try
		// No try of its own gave it the holder's TTL to sleep on: a lock
		// freed without a message or a hand-off is seen by key tracking,
		// or by this bound.
		return waitSleep, skippedTryBound, nil
	}
	acquired, ttl, err := boundedTry(wt.ctx, wt.bound, wt.try)
	wt.replied = wt.replied || err == nil
	// Blocked by another lock now (a multi-lock): sleep on its channel.
	moved := err == nil && !acquired && wt.w != nil && ws.dynamic && ws.at.waitChannel() != wt.joined
	if wt.w != nil {
		// A wake-up used for a lock another waiter goes first on, or that
		// this waiter did not take because another member blocked it,
		// goes on to the next waiter.
		h.Tried(wt.w, err == nil && !acquired && (ttl == ttlWaiterFirst || moved),
			ws.grants != nil && !acquired && ws.grants.queued())
	}
	switch {
	case ws.unsettled && errors.Is(err, ErrOutcomeUnknown):
		if wt.ctx.Err() == nil {
			wt.c.slots.failed(err)
			err = fmt.Errorf("%w: %w", ErrUnavailable, err) // as a single try's
		}
		return waitDone, 0, err
	case err != nil && wt.ctx.Err() == nil && unreachable(err):
		return wt.unreachable(err)
	case err != nil || acquired:
		return waitDone, 0, err
	case ws.wait == 0, !wt.deadline.IsZero() && !time.Now().Before(wt.deadline):
		return waitDone, 0, ErrNotAcquired
	}
	if moved {
		h.Leave(wt.w, false)
		wt.w = nil
	}
	if wt.w == nil {
		return wt.join(ttl)
	}
	return waitSleep, ttl, nil
}

// unreachable handles a try that Redis did not answer. A waiter tries
// again within its wait (Redis may be back: a restart, a failover); the
// call ends at its bound with ErrUnavailable, unless Redis answered an
// earlier try and only the last one ran out of time (a slow reply at the
// end of the wait): then the lock was held, as far as anyone knows.
func (wt *waiting) unreachable(err error) (int, time.Duration, error) {
	wt.c.slots.failed(err)
	if wt.ws.wait == 0 || !wt.bound.IsZero() && !time.Now().Before(wt.bound) {
		if wt.replied && errors.Is(err, context.DeadlineExceeded) {
			return waitDone, 0, ErrNotAcquired
		}
		return waitDone, 0, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	d := wt.backoff
	if !wt.bound.IsZero() {
		d = min(d, time.Until(wt.bound))
	}
	wt.backoff = min(2*wt.backoff, maxUnreachableBackoff)
	if err := wt.sleep(nil, max(d, 0)); err != nil {
		return waitDone, 0, err
	}
	return waitTryAgain, 0, nil
}

// join puts the waiter on its channel (subscribing on first use) after a
// try that did not take the lock. If the channel was subscribed meanwhile
// it tries again at once, since an unlock published between the try and
// the join reached no one.
func (wt *waiting) join(ttl time.Duration) (int, time.Duration, error) {
	h, ws := wt.c.hub, wt.ws
	sub := hub.Sub{Mode: ws.wake}
	wt.joined, sub.Key = ws.names()
	if ws.grants != nil {
		sub.Also = ws.grants.also()
	}
	var ready bool
	if wt.w, ready = h.Join(wt.joined, ws.shared, sub); wt.w == nil {
		return waitDone, 0, ErrClosed
	}
	if ws.handed != nil {
		h.Grantee(wt.w, ws.handed.grantee)
	}
	if ready {
		return waitTryAgain, 0, nil
	}
	return waitSleep, ttl, nil
}

// sleepStep sleeps (step 4 of await) until a signal, the holder's ttl
// (< 0: none), the waiter's refresh bound, the end of the wait, or ctx
// done. A release of this Client that handed the lock over (or may have)
// while it slept was this waiter's try: done reports the wait over then,
// or when the sleep ended it.
func (wt *waiting) sleepStep(ttl time.Duration) (done bool, _ error) {
	c, h, ws := wt.c, wt.c.hub, wt.ws
	d := time.Duration(-1) // until signalled
	if ttl >= 0 {
		d = ttl
	}
	if ws.maxSleep > 0 && (d < 0 || d > ws.maxSleep) {
		d = ws.maxSleep
	}
	if !wt.deadline.IsZero() {
		left := time.Until(wt.deadline)
		if left <= 0 {
			return true, ErrNotAcquired
		}
		if d < 0 || left < d {
			d = left
		}
	}
	// A Client that waits is named in Redis (its owner label: the
	// watchdog loop writes it), so lockgen inspect can tell whose waiters
	// these are before it holds anything.
	c.wd.start()
	h.Park(wt.w)
	serr := wt.sleep(wt.w, d)
	if state, marker, sent := h.Unpark(wt.w); state == hub.OfferGranted || state == hub.OfferUnknown || state == hub.OfferRemote {
		acquired, err := ws.handed.claim(state, marker, sent)
		h.Tried(wt.w, false, false)
		if err != nil || acquired {
			return true, err
		}
	}
	return serr != nil, serr
}

// lastTryGrace is how long the try at the end of a wait may take (a round
// trip, with room): with leaveWithin, what a call may take past its wait.
const lastTryGrace = 10 * time.Millisecond

// The pause between tries of a waiter while Redis does not answer: it
// doubles from unreachableBackoff up to maxUnreachableBackoff.
const (
	unreachableBackoff    = 10 * time.Millisecond
	maxUnreachableBackoff = 250 * time.Millisecond
)

// boundedTry runs try under a ctx that ends at bound (none if zero) and
// carries it (callBound), so that what the try does detached ends there
// too.
func boundedTry(ctx context.Context, bound time.Time, try tryFunc) (bool, time.Duration, error) {
	if bound.IsZero() {
		return try(ctx)
	}
	tctx, cancel := context.WithDeadline(context.WithValue(ctx, callBound{}, bound), bound)
	defer cancel()
	return try(tctx)
}

// unreachable reports whether err says Redis could not be reached (no
// reply: refused, reset, timed out, pool exhausted), as opposed to a reply
// or an error of lockgen's own.
func unreachable(err error) bool {
	if err == nil || scripts.IsReply(err) {
		return false
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrOutcomeUnknown) ||
		errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, redis.ErrClosed)
}

// sleepTimers holds stopped timers for waits: a wait that sleeps takes one
// and gives it back when it ends, so a contended acquisition allocates
// none. A stopped timer has nothing left in its channel (Go 1.23+).
var sleepTimers sync.Pool

// sleep waits up to d (< 0: no bound) for a signal to w (nil: none, a
// pause between tries), on the wait's timer (made on first use). It
// returns ctx's error, ErrClosed or (Shutdown began) ErrDraining if one of
// them ends it.
func (wt *waiting) sleep(w *hub.Waiter, d time.Duration) error {
	ctx, timer := wt.ctx, &wt.timer
	var signal <-chan struct{}
	if w != nil {
		signal = w.C()
	}
	var timeout <-chan time.Time
	if d >= 0 {
		if *timer == nil {
			if t, ok := sleepTimers.Get().(*time.Timer); ok {
				*timer = t
			} else {
				*timer = time.NewTimer(time.Hour)
			}
		}
		(*timer).Reset(d)
		timeout = (*timer).C
	}
	select {
	case <-signal:
	case <-timeout:
	case <-ctx.Done():
		return ctx.Err()
	case <-wt.c.closeCh:
		return ErrClosed
	case <-wt.drain:
		return fmt.Errorf("%w: Shutdown began", ErrDraining)
	}
	if d >= 0 {
		(*timer).Stop() // Go 1.23+: no stale value is left in C
	}
	return nil
}

// deferFirstTry is the in-process FIFO of a newcomer (see hub.Hub): it
// waits hub.UnlockGrace for an unlock message in transit, then, if a
// hand-off is in flight, until it is over, hub.HandoffWait in all, never
// past the end of the wait.
func (wt *waiting) deferFirstTry() error {
	w, deadline, h := wt.w, wt.deadline, wt.c.hub
	start := time.Now()
	limit := func(d time.Duration) time.Duration {
		if !deadline.IsZero() {
			d = min(d, time.Until(deadline))
		}
		return max(d, 0)
	}
	d := hub.UnlockGrace
	if h.InFlight(w) {
		d = hub.HandoffWait
	}
	if err := wt.sleep(w, limit(d)); err != nil {
		return err
	}
	if d == hub.UnlockGrace && h.InFlight(w) {
		return wt.sleep(w, limit(hub.HandoffWait-time.Since(start)))
	}
	return nil
}
