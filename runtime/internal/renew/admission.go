package renew

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// An Admission is the watchdog's admission signal: held locks come before
// new ones. The watchdog reports its backlog (Observe): how long ago the
// oldest renewal it has not had a reply to was due. While that is more
// than a quarter of a period (CloseLag) the gate is closed and new
// acquisitions wait in it (Wait); it opens again once the backlog is back
// under half that (OpenLag).
//
// The backlog grows when the watchdog cannot send its renewals on time
// (the client's CPU is saturated, every renewal worker waits for a reply)
// or its replies come late (Redis is saturated); both mean new work is
// taking what the held locks need. It also grows while Redis does not
// answer at all (a blackhole: renewals hang until their deadline), when
// new acquisitions could not succeed anyway, and once Redis answers
// again the first round that gets its replies on time opens the gate: a
// round of renewals that fail at once (connection refused) or a retry
// that is answered is no backlog. Closing then is right too: the held
// locks' retries go first.
//
// A waiter never fails for the gate: it waits at most until the limit its
// caller sets (within its own wait time), then makes its try anyway.
type Admission struct {
	closed atomic.Bool
	mu     sync.Mutex
	open   chan struct{} // closed when the gate opens; nil while open
	t      Timing
}

// CloseLag is the backlog at which the gate closes: a quarter of a period
// (at least 50 ms, above the scheduling jitter of a busy process), well
// within the two periods a hold has between its due renewal and its
// deadline.
func (t Timing) CloseLag() time.Duration { return max(t.Period/4, 50*time.Millisecond) }

// OpenLag is the backlog under which a closed gate opens again.
func (t Timing) OpenLag() time.Duration { return t.CloseLag() / 2 }

// NewAdmission returns an open gate for timing t.
func NewAdmission(t Timing) *Admission { return &Admission{t: t} }

// Closed reports whether new acquisitions wait.
func (a *Admission) Closed() bool { return a.closed.Load() }

// Observe records the watchdog's backlog and reports whether it changed
// the gate (closed or opened it).
func (a *Admission) Observe(backlog time.Duration) (changed bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.open == nil && backlog > a.t.CloseLag():
		a.open = make(chan struct{})
		a.closed.Store(true)
		return true
	case a.open != nil && backlog < a.t.OpenLag():
		close(a.open)
		a.open = nil
		a.closed.Store(false)
		return true
	}
	return false
}

// Wait returns once the gate is open, limit has passed, or ctx, drain or
// closed is done (then with ctx's error, or nil for the channels: the
// caller's own checks follow). An open gate costs one atomic load.
func (a *Admission) Wait(ctx context.Context, limit time.Time, drain, closed <-chan struct{}) error {
	if !a.closed.Load() {
		return nil
	}
	a.mu.Lock()
	open := a.open
	a.mu.Unlock()
	if open == nil {
		return nil
	}
	d := time.Until(limit)
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-open:
	case <-t.C:
	case <-drain:
	case <-closed:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}
