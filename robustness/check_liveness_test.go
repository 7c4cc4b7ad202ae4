package robustness

import (
	"testing"
	"time"
)

// sweep adds a final sweep acquisition of key.
func (s *synth) sweep(proc int, kind, key string, inv, ret float64, out, err string) *Op {
	o := s.op(proc, kind, FSweep, key, inv, ret, out, 1)
	o.Err, o.Wait = err, int64(synLimits().Liveness)
	if out == OutOK {
		o.ReleaseInvoke, o.ReleaseReturn = tms(ret+1), tms(ret+2)
	}
	return o
}

func TestCheckLivenessPasses(t *testing.T) {
	s := newSynth(2)
	s.hold(0, KindReentrant, "re:0", 0, 10, 100).synWrite(20, 30, 0, OutOK)
	o := s.op(1, KindReentrant, FAcquire, "re:0", 0, 320, OutFail, 0)
	o.Wait, o.Err = int64(300*time.Millisecond), "lockgen: re:0: acquire: lock not acquired within the wait time"
	s.sweep(0, KindReentrant, "re:0", 50_000, 50_010, OutOK, "")
	s.sweep(1, KindReentrant, "re:0", 50_000, 50_020, OutOK, "")
	r := CheckLiveness(s.build(), synLimits())
	synPass(t, r)
	synNote(t, r, "2 sweep acquisitions")
	synNote(t, r, "largest overshoot past the wait time without faults: 20.0ms", "p1/op1")
}

func TestCheckLivenessStuck(t *testing.T) {
	s := newSynth(3)
	s.op(0, KindReentrant, FAcquire, "re:0", 10, -1, OutUnknown, 0) // its process exited cleanly
	// A killed process's calls need not return.
	s.h.Processes[1].Exit, s.h.Processes[1].Err = tms(505), "signal: killed"
	s.fault(FaultKillProcess, "p1", 500, 505)
	s.op(1, KindLatch, FAwait, "latch", 10, -1, OutUnknown, 0)
	// A release that never returned.
	s.hold(2, KindReentrant, "re:1", 0, 10, 100).ReleaseReturn = Never
	r := CheckLiveness(s.build(), synLimits())
	if len(r.Violations) != 2 {
		t.Fatalf("violations %v, want the stuck call and the stuck release", r.Violations)
	}
	synViolations(t, Result{Check: r.Check, Violations: r.Violations[1:]}, 1, "stuck: the call of p0/op1 reentrant acquire re:0 invoked at 10.0ms never returned (its process exited at 100000.0ms)")
	synViolations(t, Result{Check: r.Check, Violations: r.Violations[:1]}, 1, "stuck: the release of p2/op1")
	synNote(t, r, "1 calls never returned in processes that were killed")
}

func TestCheckLivenessSweep(t *testing.T) {
	s := newSynth(2)
	s.sweep(0, KindReentrant, "re:0", 50_000, 50_010, OutOK, "")
	s.sweep(1, KindFair, "fair:0", 50_000, 54_000, OutFail, "lockgen: fair:0: acquire: lock not acquired within the wait time")
	s.sweep(1, KindRed, "red:0", 54_000, -1, OutUnknown, "")
	r := CheckLiveness(s.build(), synLimits())
	if len(r.Violations) != 3 {
		t.Fatalf("violations %v, want the failed sweep, the unreturned one and it stuck", r.Violations)
	}
	synViolations(t, Result{Check: r.Check, Violations: r.Violations[1:2]}, 1, "final sweep of fair fair:0 (wait 4s) failed at 54000.0ms: lockgen: fair:0: acquire: lock not acquired")
	synViolations(t, Result{Check: r.Check, Violations: r.Violations[2:]}, 1, "final sweep of red red:0", "never returned")
}

func TestCheckLivenessProcesses(t *testing.T) {
	s := newSynth(3)
	s.h.Processes[0].Err = "exit status 1: robustness worker: close stuck: a Client's Close did not return within 10s"
	s.h.Processes[1].Exit = Never
	s.h.Processes[2].Exit, s.h.Processes[2].Err = tms(505), "signal: killed"
	s.fault(FaultKillProcess, "p2", 500, 505)
	r := CheckLiveness(s.build(), synLimits())
	if len(r.Violations) != 2 {
		t.Fatalf("violations %v, want p0's error and p1 never exiting", r.Violations)
	}
	synViolations(t, Result{Check: r.Check, Violations: r.Violations[:1]}, 1, "process p0 exited at 100000.0ms with an error: exit status 1", "close stuck")
	synViolations(t, Result{Check: r.Check, Violations: r.Violations[1:]}, 1, "process p1 (started 0.0ms) never exited")
	synNote(t, r, "1 processes killed")
}

func TestCheckLivenessFreeLock(t *testing.T) {
	lim := synLimits() // Liveness 4s
	waiter := func(s *synth, kind, key string) *Op {
		// Faults healed at 1s: from 5s on, a free lock must be taken.
		o := s.op(1, kind, FAcquire, key, 6_000, 16_000, OutFail, 1)
		o.Wait, o.Err = int64(10*time.Second), "lockgen: "+key+": acquire: lock not acquired within the wait time"
		return o
	}
	s := newSynth(2)
	s.fault(FaultBlackhole, "all", 500, 1_000)
	waiter(s, KindReentrant, "re:0")
	s.hold(0, KindReentrant, "re:0", 0, 10, 8_000) // released at 8s: free 8s..16s
	r := CheckLiveness(s.build(), lim)
	synViolations(t, r, 1, "a waiter with wait time left did not get a free lock", "p1/op1 reentrant acquire re:0", "free from 8001.0ms to 16000.0ms")

	// Held throughout (by holds that hand over): no violation.
	s = newSynth(3)
	s.fault(FaultBlackhole, "all", 500, 1_000)
	waiter(s, KindReentrant, "re:0")
	s.hold(0, KindReentrant, "re:0", 0, 10, 8_000)
	s.hold(2, KindReentrant, "re:0", 7_000, 8_002, 20_000)
	synPass(t, CheckLiveness(s.build(), lim))

	// A multi-lock's member blocks a reentrant waiter of its key.
	s = newSynth(3)
	s.fault(FaultBlackhole, "all", 500, 1_000)
	waiter(s, KindReentrant, "re:1")
	s.hold(0, KindMulti, "multi", 0, 10, 20_000)
	synPass(t, CheckLiveness(s.build(), lim))

	// A killed holder keeps the key until its lease ends: Watchdog (2s)
	// after it was killed, plus slack.
	for _, killed := range []float64{10_000, 4_000} {
		s = newSynth(2)
		s.fault(FaultBlackhole, "all", 500, 1_000)
		waiter(s, KindReentrant, "re:0")
		s.hold(0, KindReentrant, "re:0", 0, 10, -1)
		s.h.Processes[0].Exit, s.h.Processes[0].Err = tms(killed+5), "signal: killed"
		s.fault(FaultKillProcess, "p0", killed, killed+5)
		// Healed is the end of the last fault: keep it at 1s.
		h := s.build()
		h.Healed = tms(1_000)
		r = CheckLiveness(h, lim)
		if killed == 10_000 {
			synPass(t, r) // free 12.15s..16s: under 4s
		} else {
			synViolations(t, r, 1, "did not get a free lock", "free from 6150.0ms to 16000.0ms")
		}
	}

	// An acquire of unknown outcome may hold the key for its lease.
	s = newSynth(3)
	s.fault(FaultBlackhole, "all", 500, 1_000)
	waiter(s, KindReentrant, "re:0")
	s.op(2, KindReentrant, FAcquire, "re:0", 9_000, 10_000, OutUnknown, 0)
	synPass(t, CheckLiveness(s.build(), lim))

	// A semaphore waiter is blocked only while too few permits are free.
	s = newSynth(3)
	s.fault(FaultBlackhole, "all", 500, 1_000)
	waiter(s, KindSemaphore, "sem")
	s.hold(0, KindSemaphore, "sem", 0, 10, 20_000)
	s.hold(2, KindSemaphore, "sem", 0, 10, 10_000)
	synViolations(t, CheckLiveness(s.build(), lim), 1, "free from 10001.0ms to 16000.0ms")
}

func TestCheckLivenessLongestFree(t *testing.T) {
	busy := []blocker{{start: 10, end: 20, n: 1}, {start: 15, end: 30, n: 1}, {start: 50, end: 60, n: 1}}
	if f, e := longestFree(0, 100, busy, 0); f != 60 || e != 100 {
		t.Errorf("longest free %d..%d, want 60..100", f, e)
	}
	if f, e := longestFree(0, 55, busy, 0); f != 30 || e != 50 {
		t.Errorf("longest free %d..%d, want 30..50", f, e)
	}
	if f, e := longestFree(0, 100, busy, 1); f != 20 || e != 100 { // two at once only 15..20
		t.Errorf("with a permit to spare: %d..%d, want 20..100", f, e)
	}
	if f, e := longestFree(0, 100, []blocker{{start: 0, end: 100, n: 1}}, 0); e-f != 0 {
		t.Errorf("held throughout: %d..%d free", f, e)
	}
}
