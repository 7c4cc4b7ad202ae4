package runtimetest

import (
	"sync"
	"testing"
	"time"
)

// A LagMeter measures how late this process runs its timers, so that a
// test's time bound can tell a slow runtime from a machine that did not
// run the test process: a goroutine sleeps lagTick at a time and notes
// when each sleep was due and when it woke. When the machine holds the
// process back (a clean-clone CI run once held it 1.2-1.3 s: every hold
// of a fault matrix cell ended that late after its deadline, the waiters'
// grants as late), the tick that falls in the stall wakes as late; a
// runtime that is slow while the process runs leaves the ticks on time.
type LagMeter struct {
	mu    sync.Mutex
	ticks []lagSample
}

type lagSample struct{ due, woke time.Time }

const lagTick = 5 * time.Millisecond

// StartLagMeter runs a LagMeter until the test ends.
func StartLagMeter(t testing.TB) *LagMeter {
	m := &LagMeter{}
	stop, done := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(stop); <-done })
	go func() {
		defer close(done)
		timer := time.NewTimer(lagTick)
		defer timer.Stop()
		for {
			due := time.Now().Add(lagTick)
			timer.Reset(lagTick)
			select {
			case <-stop:
				return
			case <-timer.C:
			}
			m.mu.Lock()
			m.ticks = append(m.ticks, lagSample{due, time.Now()})
			m.mu.Unlock()
		}
	}()
	return m
}

// Worst is the largest lateness of the ticks that woke between from and
// to (a tick due before from that woke in the window is a stall's).
func (m *LagMeter) Worst(from, to time.Time) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	var w time.Duration
	for _, s := range m.ticks {
		if !s.woke.Before(from) && !s.woke.After(to.Add(lagTick)) {
			w = max(w, s.woke.Sub(s.due))
		}
	}
	return w
}
