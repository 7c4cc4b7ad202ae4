package await

import (
	"sync"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/errs"
	"github.com/lockgen/lockgen/runtime/internal/hub"
)

// sleepTimers holds stopped timers for waits: a wait that sleeps takes one
// and gives it back when it ends, so a contended acquisition allocates
// none. A stopped timer has nothing left in its channel (Go 1.23+).
var sleepTimers sync.Pool

// sleep waits up to d (< 0: no bound) for a signal to w (nil: none, a
// pause between tries), on the wait's timer (made on first use). It
// returns ctx's error, errs.Closed or (Shutdown began) errs.Draining if
// one of them ends it.
func (wt *waiting) sleep(w *hub.Waiter, d time.Duration) error {
	var signal <-chan struct{}
	if w != nil {
		signal = w.C()
	}
	var timeout <-chan time.Time
	if d >= 0 {
		if wt.timer == nil {
			if t, ok := sleepTimers.Get().(*time.Timer); ok {
				wt.timer = t
			} else {
				wt.timer = time.NewTimer(time.Hour)
			}
		}
		wt.timer.Reset(d)
		timeout = wt.timer.C
	}
	select {
	case <-signal:
	case <-timeout:
	case <-wt.ctx.Done():
		return wt.ctx.Err()
	case <-wt.l.Closed:
		return errs.Closed
	case <-wt.drain:
		return errShutdown
	}
	if d >= 0 {
		wt.timer.Stop() // Go 1.23+: no stale value is left in C
	}
	return nil
}

// deferFirstTry is the in-process FIFO of a newcomer (package hub: FIFO within a client): it
// waits hub.UnlockGrace for an unlock message in transit, then, if a
// hand-off is in flight, until it is over, hub.HandoffWait in all, never
// past the end of the wait.
func (wt *waiting) deferFirstTry() error {
	w, deadline, h := wt.w, wt.deadline, wt.l.Hub
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
