package runtime

import (
	"context"
	"time"
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
	// queue lets a newcomer wait behind this client's waiters without a
	// first try (exclusive locks, not a re-entry): in-process FIFO.
	queue bool
}

// tryFunc makes one acquisition attempt. When the lock is held by someone
// else it reports the holder's remaining lease (negative: no expiry), which
// bounds how long a waiter sleeps: a holder that crashed publishes nothing.
//
// A ttl of ttlWaiterFirst means the lock was not taken although it may be
// free: another waiter goes first (a reader behind a waiting writer). A
// wake-up this waiter consumed is then handed on to that waiter.
type tryFunc func(ctx context.Context) (acquired bool, ttl time.Duration, err error)

// ttlWaiterFirst: see tryFunc.
const ttlWaiterFirst time.Duration = -2

// await runs the waiting protocol shared by the lock kinds:
//
//  1. try; done if acquired or if wait is 0;
//  2. join channel on the hub (subscribing on first use);
//  3. try again once the subscription is confirmed, so an unlock published
//     between the first try and the subscription cannot be missed;
//  4. sleep until a signal, min(holder's lease, remaining wait), or ctx
//     done, then try again.
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
	var deadline time.Time
	if wait >= 0 {
		deadline = time.Now().Add(wait)
	}
	var (
		w        *waiter
		ready    bool
		joined   string
		acquired bool
		ttl      time.Duration
	)
	if ws.queue && wait != 0 {
		joined = ws.channel()
		w, ttl, _ = c.hub.queue(joined, ws.shared)
	}
	if w == nil {
		if acquired, ttl, err = try(ctx); err != nil || acquired {
			return err
		}
		if wait == 0 {
			return ErrNotAcquired
		}
		if joined == "" {
			joined = ws.channel()
		}
		if w, ready, err = c.hub.join(joined, ws.shared); err != nil {
			return err
		}
		if ttl != ttlWaiterFirst {
			c.hub.busy(w, ttl)
		}
	}
	// consumed: the waiter took a wake-up and has not yet found out whether
	// the lock was free for it. If it leaves (an error) or sleeps again
	// without knowing, the wake-up goes on to the next waiter.
	consumed := false
	defer func() {
		if w != nil {
			c.hub.leave(w, err == nil)
			if err != nil && consumed {
				c.hub.wake(joined)
			}
		}
	}()

	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		signalled := false
		if !ready {
			sleep := time.Duration(-1) // until signalled
			if ttl >= 0 {
				sleep = ttl
			}
			if ws.maxSleep > 0 && (sleep < 0 || sleep > ws.maxSleep) {
				sleep = ws.maxSleep
			}
			if !deadline.IsZero() {
				left := time.Until(deadline)
				if left <= 0 {
					return ErrNotAcquired
				}
				if sleep < 0 || left < sleep {
					sleep = left
				}
			}
			var timeout <-chan time.Time
			if sleep >= 0 {
				timer.Reset(sleep)
				timeout = timer.C
			}
			select {
			case <-w.C:
				signalled = true
			case <-timeout:
			case <-ctx.Done():
				return ctx.Err()
			case <-c.closeCh:
				return ErrClosed
			}
		}
		ready = false
		consumed = signalled
		acquired, ttl, err = try(ctx)
		if err != nil || acquired {
			return err
		}
		if ttl == ttlWaiterFirst {
			if signalled {
				c.hub.passOn(w)
			}
		} else {
			c.hub.busy(w, ttl)
		}
		consumed = false
		if !deadline.IsZero() && !time.Now().Before(deadline) {
			return ErrNotAcquired
		}
		if ws.dynamic {
			if ch := ws.channel(); ch != joined {
				// Blocked by another lock now: sleep on its channel. An
				// unlock this waiter consumed on the old one, for a lock it
				// did not take, goes on to the next waiter there.
				c.hub.leave(w, false)
				if signalled {
					c.hub.wake(joined)
				}
				w, joined = nil, ch
				if w, ready, err = c.hub.join(ch, ws.shared); err != nil {
					w = nil
					return err
				}
				c.hub.busy(w, ttl)
			}
		}
	}
}
