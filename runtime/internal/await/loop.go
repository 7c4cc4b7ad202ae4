package await

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/errs"
	"github.com/lockgen/lockgen/runtime/internal/hub"
	"github.com/lockgen/lockgen/runtime/internal/renew"
	"github.com/lockgen/lockgen/runtime/internal/scripts"
)

// Loop is a Client's side of waiting. Its fields are set once, before the
// first Await.
type Loop struct {
	Hub       *hub.Hub
	SingleTry time.Duration // bounds a call of one try (wait 0): ReleaseTimeout
	// Closed is closed by the Client's Close; Draining when its Shutdown
	// begins, which ends the waits of fresh acquisitions.
	Closed, Draining <-chan struct{}
	// Running reports whether ctx carries a hold of the Client: running
	// work, which a Shutdown does not refuse.
	Running  func(ctx context.Context) bool
	Failed   func(error) // told of every try that got no reply from Redis
	Sleeping func()      // called before a waiter sleeps: the watchdog starts, writing the owner label
	// Gate is the admission gate of the node that serves a key, where
	// fresh acquisitions wait while its renewals run behind (nil: none).
	Gate func(key string) *renew.Admission
}

// skippedTryBound bounds the first sleep of a waiter that skipped its try
// (see attach), in place of the holder's TTL a try would have returned.
const skippedTryBound = 5 * time.Second

// The pause between tries while Redis does not answer doubles from
// UnreachableBackoff up to MaxUnreachableBackoff (a RedLock's rounds too).
const (
	UnreachableBackoff    = 10 * time.Millisecond
	MaxUnreachableBackoff = 250 * time.Millisecond
)

// Await runs the waiting protocol shared by the lock kinds:
//
//  1. if the lock's channel is subscribed already, register on it first,
//     so a wake-up published during the first try is not missed (and, for
//     exclusive locks, let a hand-off in flight finish first);
//  2. try; done if acquired or if the wait is 0;
//  3. otherwise join the channel (subscribing on first use); if it was
//     subscribed meanwhile, try again at once, since an unlock published
//     between the try and the join reached no one;
//  4. sleep until a signal, the holder's TTL as this waiter's own latest
//     try returned it, the remaining wait, or ctx done; then try again.
//
// It returns nil once acquired, an error wrapping errs.NotAcquired when
// the wait time is over, errs.Unavailable when Redis did not answer,
// errs.Closed, errs.Draining, or the ctx's error.
func (l *Loop) Await(ctx context.Context, s Spec, try Try) (err error) {
	defer func() { err = withCause(ctx, err) }()
	if err := ctx.Err(); err != nil {
		return err
	}
	running := l.Running(ctx)
	if err := l.Refused(running); err != nil {
		return err
	}
	wt := l.start(ctx, s, try, running)
	defer func() { wt.end(err == nil) }()
	if err := wt.admit(); err != nil {
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

// withCause adds to err, when ctx is done, why (context.Cause), if that
// is more than ctx's error: an acquisition under a hold's ctx (a nested
// lock, a multi-lock's next member) reports the hold's loss, not a bare
// cancellation its caller never asked for. A cause that is ctx's error is
// not added: a NotAcquired or Unavailable would read as ctx's own end.
func withCause(ctx context.Context, err error) error {
	if err == nil || ctx.Err() == nil {
		return err
	}
	if c := context.Cause(ctx); c != nil && c != ctx.Err() && !errors.Is(err, c) {
		return fmt.Errorf("%w: %w", err, c)
	}
	return err
}

// errShutdown ends the wait of a fresh acquisition once Shutdown began.
var errShutdown = fmt.Errorf("%w: Shutdown began", errs.Draining)

// Refused is the refusal of an acquisition by a closed Client, or by one
// whose Shutdown began unless the acquisition is part of running work
// (Running); nil otherwise.
func (l *Loop) Refused(running bool) error {
	switch {
	case IsClosed(l.Closed):
		return errs.Closed
	case !running && IsClosed(l.Draining):
		return errShutdown
	}
	return nil
}

// IsClosed reports whether ch (Loop.Closed, Loop.Draining) is closed.
func IsClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// waiting is the state of one call's wait (Await) between its steps.
type waiting struct {
	l   *Loop
	ctx context.Context
	s   Spec
	try Try
	// deadline is the end of the wait (zero: none); bound is when the
	// call must return (see the package doc), which every try runs under.
	deadline, bound time.Time
	drain           <-chan struct{} // Loop.Draining, for a fresh acquisition (nil: running work)
	backoff         time.Duration   // the next pause while Redis does not answer
	replied         bool            // a try got an answer from Redis
	w               *hub.Waiter     // once attached or joined
	joined          string          // the channel w is on
	timer           *time.Timer     // made on the first sleep
	skipTry         bool            // the next try is skipped: see attach
}

// The next step of a wait, after a try.
const (
	waitSleep    = iota // sleep, then try again
	waitTryAgain        // try again at once
	waitDone            // the wait is over
)

func (l *Loop) start(ctx context.Context, s Spec, try Try, running bool) waiting {
	wt := waiting{l: l, ctx: ctx, s: s, try: try, backoff: UnreachableBackoff}
	if !running {
		wt.drain = l.Draining
	}
	now := time.Now()
	switch {
	case s.Wait == 0:
		wt.deadline, wt.bound = now, now.Add(l.SingleTry)
	case s.Wait > 0:
		// The last try, at the end of the wait, gets a round trip.
		wt.deadline = now.Add(s.Wait)
		wt.bound = wt.deadline.Add(LastTryGrace)
	}
	if u := s.Until.Add(LastTryGrace); !s.Until.IsZero() && (wt.bound.IsZero() || u.Before(wt.bound)) {
		wt.bound = u
	}
	return wt
}

// end leaves the hub and gives the timer back.
func (wt *waiting) end(acquired bool) {
	if wt.timer != nil {
		wt.timer.Stop()
		sleepTimers.Put(wt.timer)
	}
	if wt.w != nil {
		wt.l.Hub.Leave(wt.w, acquired)
	}
}

// attach registers the waiter on its channel before the first try, if
// the channel is subscribed already (step 1 of Await). Behind this
// Client's own waiters on a lock its releases hand over, it skips its
// first try (which could only fail or overtake them); otherwise a
// deferred newcomer lets a hand-off finish first.
func (wt *waiting) attach() error {
	h, s := wt.l.Hub, wt.s
	if s.Wait == 0 || s.Dynamic || !h.Active() {
		return nil
	}
	wt.joined, _ = s.names()
	var deferred bool
	wt.w, deferred = h.Attach(wt.joined, s.Shared, s.Queue)
	wt.need()
	grantee := wt.w != nil && s.Handed != nil && h.Grantee(wt.w, s.Handed.Grantee)
	switch {
	case deferred && grantee:
		wt.skipTry = true
	case deferred:
		return wt.deferFirstTry()
	}
	return nil
}

// need tells the hub how many permits the waiter needs, if it said.
func (wt *waiting) need() {
	if wt.w != nil && wt.s.Need > 0 {
		wt.l.Hub.Need(wt.w, wt.s.Need)
	}
}

// tryStep makes one try (steps 2 and 3 of Await) and says what comes
// next: for waitSleep, how long the holder's lease has left (< 0: until
// signalled).
func (wt *waiting) tryStep() (int, time.Duration, error) {
	h, s := wt.l.Hub, wt.s
	if wt.skipTry {
		wt.skipTry = false
		h.Undefer(wt.w)        // it waits in line now, for offers and wake-ups
		s.Handed.WaitStarted() // only a handee skips its try
		// No try gave it the holder's TTL: key tracking, or this bound.
		return waitSleep, skippedTryBound, nil
	}
	acquired, ttl, err := wt.boundedTry()
	// An answer tells the lock was held; a refusal since (a failover)
	// makes that stale: a last try cut short then reports Unavailable.
	wt.replied = err == nil || wt.replied && !scripts.Refused(err)
	// Blocked by another lock now (a multi-lock): sleep on its channel.
	moved := err == nil && !acquired && wt.w != nil && s.Dynamic && s.At.WaitChannel() != wt.joined
	if wt.w != nil {
		// A wake-up not used (another waiter first, another member
		// blocked, or fewer permits free than this waiter needs) goes on
		// to the next waiter.
		h.Tried(wt.w, err == nil && !acquired && (ttl == TTLWaiterFirst || moved || s.Need > 0),
			s.Grants != nil && !acquired && s.Grants.Queued())
	}
	switch {
	case s.Unsettled && errors.Is(err, errs.OutcomeUnknown):
		if wt.ctx.Err() == nil {
			wt.l.Failed(err)
			err = fmt.Errorf("%w: %w", errs.Unavailable, err) // as a single try's
		}
		return waitDone, 0, err
	case err != nil && (scripts.Unreachable(err) || scripts.Refused(err)):
		if cerr := wt.ctx.Err(); cerr != nil {
			// It gave up during the try: what the try met is moot (a
			// lost reply is settled in the background).
			return waitDone, 0, cerr
		}
		return wt.unreachable(err)
	case err != nil || acquired:
		return waitDone, 0, err
	case s.Wait == 0, !wt.deadline.IsZero() && !time.Now().Before(wt.deadline):
		return waitDone, 0, errs.NotAcquired
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

// unreachable handles a try that Redis did not answer, or refused before
// running it (scripts.Refused: a slot half moved, a failover): the waiter
// tries again until its bound, then ends with errs.Unavailable, unless
// Redis answered an earlier try and only the last one ran out of time
// (then the lock was held, as far as anyone knows).
func (wt *waiting) unreachable(err error) (int, time.Duration, error) {
	wt.l.Failed(err)
	if wt.s.Wait == 0 || !wt.bound.IsZero() && !time.Now().Before(wt.bound) {
		if wt.replied && errors.Is(err, context.DeadlineExceeded) {
			return waitDone, 0, errs.NotAcquired
		}
		return waitDone, 0, fmt.Errorf("%w: %w", errs.Unavailable, err)
	}
	d := wt.backoff
	if !wt.bound.IsZero() {
		d = min(d, time.Until(wt.bound))
	}
	wt.backoff = min(2*wt.backoff, MaxUnreachableBackoff)
	if err := wt.sleep(nil, max(d, 0)); err != nil {
		return waitDone, 0, err
	}
	return waitTryAgain, 0, nil
}

// join puts the waiter on its channel after a try that did not take the
// lock (step 3 of Await).
func (wt *waiting) join(ttl time.Duration) (int, time.Duration, error) {
	h, s := wt.l.Hub, wt.s
	sub := hub.Sub{Mode: s.Wake}
	wt.joined, sub.Key = s.names()
	if s.Grants != nil {
		sub.Also = s.Grants.Also()
	}
	var ready bool
	if wt.w, ready = h.Join(wt.joined, s.Shared, sub); wt.w == nil {
		return waitDone, 0, errs.Closed
	}
	if s.Handed != nil {
		h.Grantee(wt.w, s.Handed.Grantee)
	}
	wt.need()
	if ready {
		return waitTryAgain, 0, nil
	}
	return waitSleep, ttl, nil
}

// sleepStep sleeps (step 4 of Await) until a signal, the holder's ttl
// (< 0: none), s.MaxSleep, the end of the wait, or ctx done. A hand-off
// to it while it slept was its try: done reports the wait over then, or
// when the sleep ended it.
func (wt *waiting) sleepStep(ttl time.Duration) (done bool, _ error) {
	h, s := wt.l.Hub, wt.s
	d := ttl // < 0: until signalled
	if s.MaxSleep > 0 && (d < 0 || d > s.MaxSleep) {
		d = s.MaxSleep
	}
	if !wt.deadline.IsZero() {
		left := time.Until(wt.deadline)
		if left <= 0 {
			return true, errs.NotAcquired
		}
		if d < 0 || left < d {
			d = left
		}
	}
	wt.l.Sleeping()
	h.Park(wt.w)
	serr := wt.sleep(wt.w, d)
	if state, marker, sent := h.Unpark(wt.w); state == hub.OfferGranted || state == hub.OfferUnknown || state == hub.OfferRemote {
		acquired, err := s.Handed.Claim(state, marker, sent)
		h.Tried(wt.w, false, false)
		switch {
		case err != nil && wt.ctx.Err() == nil && (scripts.Unreachable(err) || scripts.Refused(err)):
			// A hand-off not settled yet (Redis did not answer, or
			// refused): its outcome stays unknown, and the next try
			// settles it first, as after a try's lost reply. The wait
			// goes on until its bound, like a try Redis did not answer.
			n, _, err := wt.unreachable(err)
			return n == waitDone, err
		case err != nil || acquired:
			return true, err
		}
	}
	return serr != nil, serr
}

// boundedTry runs the try under a ctx that ends at the bound (if any) and
// carries it (scripts.WithCallBound).
func (wt *waiting) boundedTry() (bool, time.Duration, error) {
	if wt.bound.IsZero() {
		return wt.try(wt.ctx)
	}
	tctx, cancel := context.WithDeadline(scripts.WithCallBound(wt.ctx, wt.bound), wt.bound)
	defer cancel()
	return wt.try(tctx)
}
