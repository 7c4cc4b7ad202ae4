package watchdog

import (
	"time"

	"github.com/lockgen/lockgen/runtime/internal/leaseclock"
)

// Overload (design.md §6): the backlog the admission gate is told at each
// tick is the largest of the age of the oldest due renewal of a call in
// flight (a lane's busy), how late the replies since the last tick came
// after their holds were due (late), and the age of the oldest hold of a
// call queued for a worker of its node (a lane's queue).

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

// observe tells the gate the backlog at now.
func (w *Watchdog) observe(now time.Time) {
	backlog := time.Duration(w.late.Swap(0))
	behind := func(l *lane) {
		for i := range l.busy {
			if at := l.busy[i].Load(); at != 0 {
				backlog = max(backlog, time.Duration(leaseclock.Nanos(now)-at))
			}
		}
		if at := l.pending(); at != 0 {
			backlog = max(backlog, time.Duration(leaseclock.Nanos(now)-at))
		}
	}
	behind(w.one)
	for _, l := range w.lanes {
		behind(l)
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

// Stall, for tests, takes a worker slot of the lane of one server and
// marks its call due long ago until release, as if Redis had not
// answered: the next tick closes the gate.
func (w *Watchdog) Stall() (release func()) {
	l := w.one
	slot := <-l.free
	l.busy[slot].Store(leaseclock.Nanos(time.Now().Add(-2 * w.timing.CloseLag())))
	return func() {
		if j, ok := l.next(slot); ok { // a call queued meanwhile
			w.jobs.Add(1)
			go w.work(l, slot, j)
		}
	}
}
