package watchdog

import (
	"testing"
	"time"
)

// Wait before any hold (the loop never started) returns at once, and no
// loop starts after it: a Start then is a no-op, so a second Wait, with
// Config.Closed still open, returns too instead of waiting for a loop.
func TestWaitBeforeAnyHoldReturnsAndNoLoopStartsAfterIt(t *testing.T) {
	f := newFixture(t)
	waited := make(chan struct{})
	go func() {
		f.wd.Wait()
		f.wd.Start()
		f.wd.Wait()
		close(waited)
	}()
	select {
	case <-waited:
	case <-time.After(5 * time.Second):
		t.Fatal("Wait blocked: it waits for a loop that never ran, or one started after it")
	}
}

// Once the loop runs, Wait returns only after Config.Closed is closed.
func TestWaitReturnsOnlyOnceTheStartedLoopStopped(t *testing.T) {
	f := newFixture(t)
	f.wd.Start()
	f.wd.Start()
	waited := make(chan struct{})
	go func() {
		f.wd.Wait()
		close(waited)
	}()
	select {
	case <-waited:
		t.Fatal("Wait returned while the loop runs")
	case <-time.After(3 * f.wd.timing.Tick):
	}
	close(f.closed)
	f.closed = make(chan struct{}) // the fixture's cleanup closes it
	select {
	case <-waited:
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not return once Closed was closed")
	}
}
