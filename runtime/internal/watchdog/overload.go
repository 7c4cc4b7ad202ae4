package watchdog

import (
	"time"

	"github.com/lockgen/lockgen/runtime/internal/holds"
	"github.com/lockgen/lockgen/runtime/internal/leaseclock"
)

// Overload (design.md §6): the backlog the admission gate is told at each
// tick is the largest of the age of the oldest due renewal of a call in
// flight (busy), how late the replies since the last tick came after
// their holds were due (late), and the age of the oldest hold of a call
// waiting for a worker.

// replied records that a call whose oldest hold was due at oldest got its
// replies (or gave up) at now.
func (w *Watchdog) replied(now time.Time, oldest int64) {
	late := leaseclock.Nanos(now) - oldest
	for {
		cur := w.late.Load()
		if late <= cur || w.late.CompareAndSwap(cur, late) {
			return
		}
	}
}

// observe tells the gate the backlog at now; pending is the oldest due
// time of a call waiting for a worker (0: none).
func (w *Watchdog) observe(now time.Time, pending int64) {
	backlog := time.Duration(w.late.Swap(0))
	for i := range w.busy {
		if at := w.busy[i].Load(); at != 0 {
			backlog = max(backlog, time.Duration(leaseclock.Nanos(now)-at))
		}
	}
	if pending != 0 {
		backlog = max(backlog, time.Duration(leaseclock.Nanos(now)-pending))
	}
	if !w.gate.Observe(backlog) {
		return
	}
	if w.gate.Closed() {
		w.cfg.Warn("watchdog renewals run behind: new acquisitions wait", "backlog", backlog.Round(time.Millisecond))
		return
	}
	w.cfg.Log.Debug("watchdog renewals caught up: new acquisitions go on", "backlog", backlog.Round(time.Millisecond))
}

// worker takes a free worker slot for calls[0], waiting while every
// worker is busy (telling the gate how late that call gets); false: the
// Client closed meanwhile.
func (w *Watchdog) worker(calls [][][]holds.Due) (int, bool) {
	select {
	case s := <-w.workers:
		return s, true
	default:
	}
	stall := time.NewTimer(w.timing.Tick)
	defer stall.Stop()
	pending, _ := holds.Earliest(calls[0])
	for {
		select {
		case s := <-w.workers:
			return s, true
		case <-w.cfg.Closed:
			return 0, false
		case now := <-stall.C:
			w.observe(now, pending)
			stall.Reset(w.timing.Tick)
		}
	}
}

// Stall, for tests, takes a worker slot and marks its call due long ago
// until release, as if Redis had not answered: the next tick closes the
// gate.
func (w *Watchdog) Stall() (release func()) {
	slot := <-w.workers
	w.busy[slot].Store(leaseclock.Nanos(time.Now().Add(-2 * w.timing.CloseLag())))
	return func() {
		w.busy[slot].Store(0)
		w.workers <- slot
	}
}
