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
	channel  func() string // the channel to sleep on (computed on contention only)
	dynamic  bool          // channel may change after each try (multi-lock: the blocking member's)
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
	// key returns the key whose deletion or expiry frees the lock (the
	// hub watches it); nil: none. With dynamic, the blocking member's.
	key func() string
	// grantee returns the owner token and lease argument a local release
	// hands the lock over with (handoff.go); nil: this waiter cannot be
	// handed the lock. claim then takes a lock handed over, or settles a
	// hand-off whose outcome is unknown; when it took the lock, the wait
	// is over as after a successful try.
	grantee func() (field string, px any)
	claim   func(state hub.OfferState, marker string, sent time.Time) (bool, error)
	// also returns the companion channel subscribed with channel, where
	// releases elsewhere grant this client's waiters the lock (grant.go);
	// nil: none.
	also func() string
	// queued reports whether a try queued the waiter in Redis (grant.go).
	queued func() bool
	// until, when set, is when the whole call this wait is part of must
	// return (a multi-lock's or a RedLock's wait): no try runs past it.
	until time.Time
	// waitStarted is called when a waiter that can be handed the lock
	// sleeps without a first try (behind the Client's own waiters): the
	// try would have reported the wait as started.
	waitStarted func()
	// unsettled: a try whose outcome is unknown (ErrOutcomeUnknown) ends
	// the call with that error (and ErrUnavailable). Such a try took what it took and nothing
	// settles it (a plain semaphore's permits have no ids): another try
	// could take as much again, and ErrNotAcquired at the end of the
	// wait would tell the caller that nothing was taken.
	unsettled bool
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
	wait := ws.wait
	if err := ctx.Err(); err != nil {
		return err
	}
	if c.isClosed() {
		return ErrClosed
	}
	if err := c.refuseFresh(ctx); err != nil {
		return err
	}
	// Shutdown ends the wait of a fresh acquisition, not one of running
	// work (its ctx carries a hold of this Client).
	var drain <-chan struct{}
	if c.holdOf(ctx) == nil {
		drain = c.drainCh
	}
	var deadline time.Time
	if wait >= 0 {
		deadline = time.Now().Add(wait)
	}
	// bound is when the call must return: the end of the wait, or the
	// caller's (ws.until) if sooner; a single try gets the release
	// timeout. Every try runs under it, and so does what a try does
	// detached (settling a lost reply): what is left then goes on in the
	// background.
	bound := deadline
	switch {
	case wait == 0:
		bound = time.Now().Add(c.opts.ReleaseTimeout)
	case wait > 0:
		// The last try, at the end of the wait, gets a round trip.
		bound = deadline.Add(lastTryGrace)
	}
	if u := ws.until.Add(lastTryGrace); !ws.until.IsZero() && (bound.IsZero() || u.Before(bound)) {
		bound = u
	}
	backoff := unreachableBackoff
	replied := false // a try got an answer from Redis
	h := c.hub
	var (
		w        *hub.Waiter
		joined   string
		acquired bool
		ttl      time.Duration
	)
	defer func() {
		if w != nil {
			h.Leave(w, err == nil)
		}
	}()
	var timer *time.Timer // made on the first sleep: the uncontended path needs none
	skipTry := false      // its first try is skipped: see below
	defer func() {
		if timer != nil {
			timer.Stop()
			sleepTimers.Put(timer)
		}
	}()

	if wait != 0 && !ws.dynamic && h.Active() {
		joined = ws.channel()
		var deferred bool
		w, deferred = h.Attach(joined, ws.shared, ws.queue)
		grantee := w != nil && ws.grantee != nil && h.Grantee(w, ws.grantee)
		switch {
		case deferred && grantee:
			// Behind this Client's own waiters on a lock its releases hand
			// over: its turn comes as a hand-off (or a wake-up), and a try
			// now could only fail or overtake them. It sleeps at once.
			skipTry = true
		case deferred:
			if err := c.deferFirstTry(ctx, w, &timer, deadline, drain); err != nil {
				return err
			}
		}
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if skipTry {
			skipTry = false
			h.Undefer(w) // it waits in line now, for offers and wake-ups
			if ws.waitStarted != nil {
				ws.waitStarted()
			}
			// No try of its own gave it the holder's TTL to sleep on: a
			// lock freed without a message or a hand-off is seen by key
			// tracking, or by this bound.
			ttl = skippedTryBound
		} else {
			acquired, ttl, err = boundedTry(ctx, bound, try)
			replied = replied || err == nil
			// Blocked by another lock now (a multi-lock): sleep on its channel.
			moved := err == nil && !acquired && w != nil && ws.dynamic && ws.channel() != joined
			if w != nil {
				// A wake-up used for a lock another waiter goes first on, or
				// that this waiter did not take because another member
				// blocked it, goes on to the next waiter.
				h.Tried(w, err == nil && !acquired && (ttl == ttlWaiterFirst || moved),
					ws.queued != nil && !acquired && ws.queued())
			}
			if ws.unsettled && errors.Is(err, ErrOutcomeUnknown) {
				if ctx.Err() != nil {
					return err
				}
				c.slots.failed(err)
				return fmt.Errorf("%w: %w", ErrUnavailable, err) // as a single try's
			}
			if err != nil && ctx.Err() == nil && unreachable(err) {
				c.slots.failed(err)
				// Redis did not answer. A waiter tries again within its
				// wait (Redis may be back: a restart, a failover); the
				// call ends at its bound with ErrUnavailable, unless Redis
				// answered an earlier try and only the last one ran out
				// of time (a slow reply at the end of the wait): then
				// the lock was held, as far as anyone knows.
				if wait == 0 || !bound.IsZero() && !time.Now().Before(bound) {
					if replied && errors.Is(err, context.DeadlineExceeded) {
						return ErrNotAcquired
					}
					return fmt.Errorf("%w: %w", ErrUnavailable, err)
				}
				d := backoff
				if !bound.IsZero() {
					d = min(d, time.Until(bound))
				}
				backoff = min(2*backoff, maxUnreachableBackoff)
				if err := c.sleep(ctx, nil, &timer, max(d, 0), drain); err != nil {
					return err
				}
				continue
			}
			if err != nil || acquired {
				return err
			}
			if wait == 0 {
				return ErrNotAcquired
			}
			if !deadline.IsZero() && !time.Now().Before(deadline) {
				return ErrNotAcquired
			}
			if moved {
				h.Leave(w, false)
				w = nil
			}
			if w == nil {
				joined = ws.channel()
				sub := hub.Sub{Mode: ws.wake}
				if ws.key != nil {
					sub.Key = ws.key()
				}
				if ws.also != nil {
					sub.Also = ws.also()
				}
				var ready bool
				if w, ready = h.Join(joined, ws.shared, sub); w == nil {
					return ErrClosed
				}
				if ws.grantee != nil {
					h.Grantee(w, ws.grantee)
				}
				if ready {
					continue
				}
			}
		}
		d := time.Duration(-1) // until signalled
		if ttl >= 0 {
			d = ttl
		}
		if ws.maxSleep > 0 && (d < 0 || d > ws.maxSleep) {
			d = ws.maxSleep
		}
		if !deadline.IsZero() {
			left := time.Until(deadline)
			if left <= 0 {
				return ErrNotAcquired
			}
			if d < 0 || left < d {
				d = left
			}
		}
		// A Client that waits is named in Redis (its owner label: the
		// watchdog loop writes it), so lockgen inspect can tell whose
		// waiters these are before it holds anything.
		c.wd.start(c)
		h.Park(w)
		serr := c.sleep(ctx, w, &timer, d, drain)
		if state, marker, sent := h.Unpark(w); state == hub.OfferGranted || state == hub.OfferUnknown || state == hub.OfferRemote {
			// A release of this client handed the lock over (or may
			// have): that was this waiter's try.
			acquired, err = ws.claim(state, marker, sent)
			h.Tried(w, false, false)
			if err != nil || acquired {
				return err
			}
		}
		if serr != nil {
			return serr
		}
	}
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
// pause between tries), on *timer (made on first use). It returns ctx's
// error, ErrClosed or (drain closed: Shutdown began) ErrDraining if one of
// them ends it.
func (c *Client) sleep(ctx context.Context, w *hub.Waiter, timer **time.Timer, d time.Duration, drain <-chan struct{}) error {
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
	case <-c.closeCh:
		return ErrClosed
	case <-drain:
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
// past deadline.
func (c *Client) deferFirstTry(ctx context.Context, w *hub.Waiter, timer **time.Timer, deadline time.Time, drain <-chan struct{}) error {
	start := time.Now()
	limit := func(d time.Duration) time.Duration {
		if !deadline.IsZero() {
			d = min(d, time.Until(deadline))
		}
		return max(d, 0)
	}
	d := hub.UnlockGrace
	if c.hub.InFlight(w) {
		d = hub.HandoffWait
	}
	if err := c.sleep(ctx, w, timer, limit(d), drain); err != nil {
		return err
	}
	if d == hub.UnlockGrace && c.hub.InFlight(w) {
		return c.sleep(ctx, w, timer, limit(hub.HandoffWait-time.Since(start)), drain)
	}
	return nil
}
