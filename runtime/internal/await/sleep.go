package await

import (
	"sync"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/errs"
	"github.com/lockgen/lockgen/runtime/internal/hub"
)

// sleepTimers holds stopped timers (Go 1.23+: empty channels), so a
// contended acquisition allocates none.
var sleepTimers sync.Pool

// sleep waits up to d (< 0: no bound) for a signal to w (nil: none). It
// returns ctx's error, errs.Closed or errs.Draining if one of them ends it.
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

// deferFirstTry is a newcomer's in-process FIFO (package hub): it waits
// hub.UnlockGrace for an unlock message in transit, then, while a hand-off
// is in flight, hub.HandoffWait in all, never past the end of the wait.
func (wt *waiting) deferFirstTry() error {
	w, h, start := wt.w, wt.l.Hub, time.Now()
	limit := func(d time.Duration) time.Duration {
		if !wt.deadline.IsZero() {
			d = min(d, time.Until(wt.deadline))
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
