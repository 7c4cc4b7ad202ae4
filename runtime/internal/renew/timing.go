package renew

import (
	"time"

	"github.com/lockgen/lockgen/runtime/internal/leaseclock"
)

// Timing is the watchdog's clock arithmetic for one WatchdogTimeout.
type Timing struct {
	Period time.Duration // between two renewals of a hold
	Tick   time.Duration // the wheel's granularity: holds due in one tick share calls
}

// NewTiming is the timing of a watchdog lease.
func NewTiming(watchdog time.Duration) Timing {
	p := watchdog / 3
	return Timing{Period: p, Tick: min(max(p/20, 5*time.Millisecond), 500*time.Millisecond)}
}

// TickOf is the wheel tick at falls in; tick is that of ns (Nanos).
func (t Timing) TickOf(at time.Time) int64 { return t.tick(leaseclock.Nanos(at)) }

func (t Timing) tick(ns int64) int64 { return ns / int64(t.Tick) }

// Next is when a hold whose renewal, due at due (maybe sent early, to
// fill a call) and sent at sent, was confirmed is renewed again.
func (t Timing) Next(sent, due time.Time) time.Time {
	if !due.After(sent) {
		return sent.Add(t.Period)
	}
	next := due.Add(t.Period)
	if limit := sent.Add(t.Period + t.Period/4); limit.Before(next) {
		return limit
	}
	return next
}

// Retry is how long a hold whose renewal failed, left before its
// deadline, waits for its next try: soon, and several times before it.
func (t Timing) Retry(left time.Duration) time.Duration {
	return max(min(t.Period/8, left/4), time.Millisecond)
}

// EarlyHorizon is the last tick whose holds may be renewed early at now.
func (t Timing) EarlyHorizon(now time.Time) int64 { return t.TickOf(now.Add(t.Period / 4)) }
