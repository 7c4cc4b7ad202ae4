package await

import "time"

// singleTryGate bounds how long a single try (wait 0) waits in a closed
// gate: a short pause slows a loop of tries down.
const singleTryGate = 20 * time.Millisecond

// gateReserve is how much of its wait a waiter keeps for its try when the
// gate held it back until the end.
const gateReserve = 50 * time.Millisecond

// admit holds a fresh acquisition back while the admission gate is closed,
// until it opens or the wait leaves only the time its try needs (a single
// try: singleTryGate at most); then it tries. Running work is never held
// back: it may be what releases holds.
func (wt *waiting) admit() error {
	gate := wt.l.Gate
	if gate == nil || wt.drain == nil || !gate.Closed() {
		return nil
	}
	var limit time.Time
	switch {
	case wt.s.Wait == 0:
		limit = time.Now().Add(min(singleTryGate, time.Until(wt.bound)/4))
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
	return gate.Wait(wt.ctx, limit, wt.drain, wt.l.Closed)
}
