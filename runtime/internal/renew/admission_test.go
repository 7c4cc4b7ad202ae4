package renew

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"
)

func TestAdmissionClosesOnABacklogAndOpensWhenItIsWorkedOff(t *testing.T) {
	tm := NewTiming(3 * time.Second) // period 1s: closes above 250ms, opens under 125ms
	a := NewAdmission(tm)
	steps := []struct {
		backlog       time.Duration
		closed, moved bool
	}{
		{50 * time.Millisecond, false, false},  // a tick late: normal
		{250 * time.Millisecond, false, false}, // at the threshold: still open
		{260 * time.Millisecond, true, true},   // behind: closed
		{200 * time.Millisecond, true, false},  // catching up: stays closed
		{125 * time.Millisecond, true, false},
		{120 * time.Millisecond, false, true}, // worked off: open
		{200 * time.Millisecond, false, false},
		{time.Second, true, true},
		{0, false, true}, // nothing due, nothing in flight
	}
	for i, s := range steps {
		if moved := a.Observe(s.backlog); moved != s.moved || a.Closed() != s.closed {
			t.Fatalf("step %d (backlog %v): changed %v closed %v, want %v %v", i, s.backlog, moved, a.Closed(), s.moved, s.closed)
		}
	}
}

func TestAdmissionThresholdsHaveAFloorUnderAPeriod(t *testing.T) {
	for _, c := range []struct{ watchdog, close time.Duration }{
		{30 * time.Second, 2500 * time.Millisecond}, // a quarter of the period
		{600 * time.Millisecond, 50 * time.Millisecond},
		{150 * time.Millisecond, 50 * time.Millisecond},
		{30 * time.Millisecond, 10 * time.Millisecond}, // the period: the holds' slack is two
	} {
		tm := NewTiming(c.watchdog)
		if tm.CloseLag() != c.close || tm.OpenLag() != c.close/2 {
			t.Fatalf("WatchdogTimeout %v: close %v open %v, want %v and %v", c.watchdog, tm.CloseLag(), tm.OpenLag(), c.close, c.close/2)
		}
	}
}

func TestAdmissionWaitsOnlyWhileClosedAndWithinItsLimit(t *testing.T) {
	a := NewAdmission(NewTiming(3 * time.Second))
	ctx := context.Background()
	far := time.Now().Add(time.Hour)
	if err := a.Wait(ctx, far, nil, nil); err != nil {
		t.Fatalf("open gate: %v", err)
	}
	a.Observe(time.Second)
	// A limit already passed: no wait at all (the caller's try follows).
	if err := a.Wait(ctx, time.Now().Add(-time.Millisecond), nil, nil); err != nil {
		t.Fatalf("passed limit: %v", err)
	}
	// Opening releases a waiter.
	done := make(chan error)
	go func() { done <- a.Wait(ctx, far, nil, nil) }()
	a.Observe(0)
	if err := <-done; err != nil {
		t.Fatalf("opened: %v", err)
	}
	// So does its ctx, with its error, and Shutdown's drain or Close.
	a.Observe(time.Second)
	cctx, cancel := context.WithCancel(ctx)
	go func() { done <- a.Wait(cctx, far, nil, nil) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	for _, which := range []string{"drain", "closed"} {
		ch := make(chan struct{})
		go func() {
			if which == "drain" {
				done <- a.Wait(ctx, far, ch, nil)
			} else {
				done <- a.Wait(ctx, far, nil, ch)
			}
		}()
		close(ch)
		if err := <-done; err != nil {
			t.Fatalf("%s: %v", which, err)
		}
	}
	if !a.Closed() {
		t.Fatal("waiters opened the gate")
	}
}

// A Wait racing the gate's opening and closing never misses an opening:
// once the gate is left open, every waiter returns, whether it found the
// gate closed before the flapping began or loaded it amid Observe calls.
func TestAWaitRacingTheGateNeverMissesItsOpening(t *testing.T) {
	a := NewAdmission(NewTiming(3 * time.Second))
	ctx := context.Background()
	far := time.Now().Add(time.Hour)
	const early, racing = 20, 200
	done := make(chan struct{}, early+racing)
	wait := func() {
		_ = a.Wait(ctx, far, nil, nil)
		done <- struct{}{}
	}
	a.Observe(time.Second)
	for range early {
		go wait()
	}
	time.Sleep(10 * time.Millisecond) // they wait in the closed gate
	stop, flapped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(flapped)
		for {
			a.Observe(0)
			select {
			case <-stop:
				return
			default:
			}
			a.Observe(time.Second)
		}
	}()
	for range racing {
		go wait()
		runtime.Gosched()
	}
	close(stop)
	<-flapped
	if a.Closed() {
		t.Fatal("the gate reads closed after it opened")
	}
	timeout := time.After(5 * time.Second)
	for i := range early + racing {
		select {
		case <-done:
		case <-timeout:
			t.Fatalf("%d of %d waiters still wait at an open gate", early+racing-i, early+racing)
		}
	}
}
