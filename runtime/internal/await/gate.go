package await

import "time"

// gateReserve is how much of its wait a waiter keeps for its try when the
// gate held it back until the end.
const gateReserve = 50 * time.Millisecond

// admit holds a fresh acquisition back while the admission gate is closed
// (Loop.Gate: the watchdog's renewals run behind), until it opens or the
// wait leaves only the time its try needs. A single try (wait 0) asked
// not to wait for the lock, not to be sent while the Client cannot renew
// what it holds: it waits until the gate opens, for at most a quarter of
// the time it has (Loop.SingleTry, the ReleaseTimeout, or its ctx's
// deadline if sooner), which leaves the rest for the try itself. Held
// back only briefly, a flood of single tries (a loop taking many locks)
// crowded out the renewals of the holds it had taken on a CPU-starved
// box. Running work (a ctx carrying a hold of the Client) is never held
// back: it may be what releases holds. No waiter fails for the gate: once
// it is let through, it tries.
func (wt *waiting) admit() error {
	gate := wt.l.Gate
	if gate == nil || wt.drain == nil || !gate.Closed() {
		return nil
	}
	var limit time.Time
	switch {
	case wt.s.Wait == 0:
		end := wt.bound
		if d, ok := wt.ctx.Deadline(); ok && d.Before(end) {
			end = d
		}
		limit = time.Now().Add(time.Until(end) / 4)
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
