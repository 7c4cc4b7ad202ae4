package runtime

import (
	"time"

	"github.com/lockgen/lockgen/runtime/internal/holds"
)

// Overload: held locks come before new ones (design.md §6). The watchdog
// measures its backlog, how long ago the oldest renewal it has no reply
// to was due, and while that runs past a quarter of a period the
// admission gate (renew.Admission) holds new acquisitions back in await,
// each within its own wait time. Holds are never released for it.
//
// The backlog is, at each tick, the largest of: the age of the oldest due
// renewal of a call still in flight (busy), how late the replies since
// the last tick came after their holds were due (late), and, while every
// worker is busy and a call waits for one, the age of that call's oldest
// hold (worker).

// singleTryGate bounds how long a single try (wait 0) waits in a closed
// gate: it asked not to wait for the lock, but under overload a short
// pause per try is what slows a loop of tries down.
const singleTryGate = 20 * time.Millisecond

// gateReserve is how much of its wait a waiter keeps for its try when the
// gate held it back until the end.
const gateReserve = 50 * time.Millisecond

// oldestDue is the earliest time (Unix ns) a hold of batches was due.
func oldestDue(batches [][]holds.Due) int64 {
	var at int64
	for _, b := range batches {
		for _, u := range b {
			if at == 0 || u.At < at {
				at = u.At
			}
		}
	}
	return at
}

// replied records that a call whose oldest hold was due at oldest got its
// replies (or gave up) at now.
func (w *watchdog) replied(now time.Time, oldest int64) {
	late := now.UnixNano() - oldest
	for {
		cur := w.late.Load()
		if late <= cur || w.late.CompareAndSwap(cur, late) {
			return
		}
	}
}

// observe tells the gate the backlog at now; pending is the oldest due
// time (Unix ns) of a call waiting for a worker (0: none).
func (w *watchdog) observe(now time.Time, pending int64) {
	backlog := time.Duration(w.late.Swap(0))
	for i := range w.busy {
		if at := w.busy[i].Load(); at != 0 {
			backlog = max(backlog, time.Duration(now.UnixNano()-at))
		}
	}
	if pending != 0 {
		backlog = max(backlog, time.Duration(now.UnixNano()-pending))
	}
	if !w.gate.Observe(backlog) {
		return
	}
	if w.gate.Closed() {
		w.c.warn("watchdog renewals run behind: new acquisitions wait", "backlog", backlog.Round(time.Millisecond))
		return
	}
	w.c.log.Debug("watchdog renewals caught up: new acquisitions go on", "backlog", backlog.Round(time.Millisecond))
}

// worker takes a free worker slot for the next of calls, waiting while
// every worker is busy (telling the gate how late the waiting call gets).
// It reports false when the Client closed meanwhile.
func (w *watchdog) worker(calls [][][]holds.Due) (int, bool) {
	select {
	case s := <-w.workers:
		return s, true
	default:
	}
	stall := time.NewTimer(w.timing.Tick)
	defer stall.Stop()
	pending := oldestDue(calls[0])
	for {
		select {
		case s := <-w.workers:
			return s, true
		case <-w.c.closeCh:
			return 0, false
		case now := <-stall.C:
			w.observe(now, pending)
			stall.Reset(w.timing.Tick)
		}
	}
}

// admit holds a fresh acquisition back while the gate is closed, until
// it opens or the wait leaves only the time its try needs; a single try
// waits at most singleTryGate. Running work (a ctx carrying a hold of
// this Client) is never held back: it may be what releases holds.
func (wt *waiting) admit() error {
	gate := wt.c.wd.gate
	if wt.drain == nil || !gate.Closed() {
		return nil
	}
	var limit time.Time
	switch {
	case wt.ws.wait == 0:
		limit = time.Now().Add(min(singleTryGate, time.Until(wt.bound)/4))
	case !wt.deadline.IsZero():
		limit = wt.deadline.Add(-min(wt.ws.wait/4, gateReserve))
	default:
		limit = time.Now().Add(time.Hour) // until the gate opens or ctx ends
	}
	if !wt.ws.until.IsZero() {
		if u := wt.ws.until.Add(-gateReserve); u.Before(limit) {
			limit = u
		}
	}
	return gate.Wait(wt.ctx, limit, wt.drain, wt.c.closeCh)
}
