package renew

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// An Admission is the admission gate of one node (the package doc). Its
// backlog grows when renewals to it cannot be sent on time (the client's
// CPU is saturated) or their replies come late (the node is): new work is
// taking what held locks need. It grows too while the node does not
// answer at all, when new acquisitions there could not succeed anyway;
// the first round answered on time opens the gate again (renewals that
// fail at once are no backlog). A waiter never fails for the gate: past
// the limit its caller sets, it makes its try anyway.
type Admission struct {
	mu sync.Mutex // serialises Observe
	// open is nil while the gate is open; while closed, a channel closed
	// when it opens.
	open atomic.Pointer[chan struct{}]
	t    Timing
}

// CloseLag is the backlog at which the gate closes: a quarter of a period,
// at least 50 ms (above the scheduling jitter of a busy process) but never
// more than a period, well within the two periods a hold has between its
// due renewal and its deadline (a floor of 50 ms on a WatchdogTimeout
// under 150 ms closed the gate only after the holds it was for were lost).
// The watchdog spaces the rounds of every hold that new connections start
// by it too.
func (t Timing) CloseLag() time.Duration { return max(t.Period/4, min(50*time.Millisecond, t.Period)) }

// OpenLag is the backlog under which a closed gate opens again.
func (t Timing) OpenLag() time.Duration { return t.CloseLag() / 2 }

// NewAdmission returns an open gate for timing t.
func NewAdmission(t Timing) *Admission { return &Admission{t: t} }

// Closed reports whether new acquisitions wait.
func (a *Admission) Closed() bool { return a.open.Load() != nil }

// Observe records the watchdog's backlog and reports whether it closed or
// opened the gate.
func (a *Admission) Observe(backlog time.Duration) (changed bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	open := a.open.Load()
	switch {
	case open == nil && backlog > a.t.CloseLag():
		ch := make(chan struct{})
		a.open.Store(&ch)
		return true
	case open != nil && backlog < a.t.OpenLag():
		a.open.Store(nil)
		close(*open)
		return true
	}
	return false
}

// Wait returns once the gate is open, limit has passed, or ctx, drain or
// closed is done (then with ctx's error, or nil for the channels: the
// caller's own checks follow). An open gate costs one atomic load.
func (a *Admission) Wait(ctx context.Context, limit time.Time, drain, closed <-chan struct{}) error {
	open := a.open.Load()
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
	case <-*open:
	case <-t.C:
	case <-drain:
	case <-closed:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}
