package await

import (
	"time"

	"github.com/lockgen/lockgen/runtime/internal/errs"
)

// gateReserve is how much of its wait a waiter keeps for its try when the
// gate held it back until the end.
const gateReserve = 50 * time.Millisecond

// singleTryGate bounds how long a single try (wait 0) waits in a closed
// gate: a short pause slows a loop of tries down. Holding them until the
// gate opened (up to a quarter of ReleaseTimeout) measured worse: with
// four CPU hogs beside, 300,000 holds took 12 min instead of 3 and
// 206,207 were lost instead of 157,214.
const singleTryGate = 20 * time.Millisecond

// admit holds a fresh acquisition back while the admission gate of the
// node that serves its key is closed, until it opens or the wait leaves
// only the time its try needs (a single try: singleTryGate, at most a
// quarter of what is left to its bound or ctx's deadline). Running work
// is never held back: it may be what releases holds.
func (wt *waiting) admit() error {
	if wt.l.Gate == nil || wt.drain == nil {
		return nil
	}
	gate := wt.l.Gate(wt.s.gateKey())
	if gate == nil || !gate.Closed() {
		return nil
	}
	var limit time.Time
	switch {
	case wt.s.Wait == 0:
		end := wt.bound
		if d, ok := wt.ctx.Deadline(); ok && d.Before(end) {
			end = d
		}
		limit = time.Now().Add(min(singleTryGate, time.Until(end)/4))
	case !wt.deadline.IsZero():
		limit = wt.deadline.Add(-min(wt.s.Wait/4, gateReserve))
	default:
		limit = time.Now().Add(time.Hour) // until the gate opens or ctx ends
	}
	if !wt.s.Until.IsZero() {
		if u := wt.s.Until.Add(-gateReserve); u.Before(limit) {
			limit = u
		}
	}
	if err := gate.Wait(wt.ctx, limit, wt.drain, wt.l.Closed); err != nil {
		return err
	}
	// A fresh acquisition stops at Close or Shutdown, as in its sleeps.
	switch {
	case IsClosed(wt.l.Closed):
		return errs.Closed
	case IsClosed(wt.drain):
		return errShutdown
	}
	return nil
}
