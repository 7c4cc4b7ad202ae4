package robustness

import "testing"

// fenced adds a fenced hold with token n.
func (s *synth) fenced(proc int, n int64, inv, ret, release float64) *Op {
	o := s.hold(proc, KindFenced, "f", inv, ret, release)
	o.N = n
	return o
}

func TestCheckFencingPasses(t *testing.T) {
	s := newSynth(3)
	// p0 holds token 1 and loses the lock at 100 (its lease ran out); p1
	// takes token 2 and writes it; p0, not looking at its ctx, writes its
	// token late and is refused.
	s.fenced(0, 1, 0, 10, 300).synWrite(20, 25, 1, OutOK).synDone(100, "lockgen: f: lease: lock lost: fixed lease of 90ms ran out").
		synWrite(210, 215, 1, OutFail)
	s.fenced(1, 2, 50, 150, 250).synWrite(160, 165, 2, OutOK)
	s.fenced(2, 3, 200, 251, 260) // no writes
	// A re-entry takes a token too; a write after the release is refused.
	s.fenced(2, 4, 300, 310, 400).synWrite(320, 325, 4, OutOK).synWrite(410, 415, 4, OutFail)
	o := s.fenced(2, 5, 320, 330, 340)
	o.Nested = true
	s.fenced(1, 6, 390, 401, 500).synWrite(405, 409, 6, OutOK)
	r := CheckFencing(s.build(), synLimits())
	synPass(t, r)
	synNote(t, r, "1 refusals of writes made after their hold's release")
	if r.Checked != 6+6 {
		t.Errorf("checked %d, want 6 holds and 6 writes", r.Checked)
	}
}

func TestCheckFencingTokensNotGrowing(t *testing.T) {
	s := newSynth(2)
	s.fenced(0, 5, 0, 10, 100)
	s.fenced(1, 3, 50, 150, 250) // acquired after the first ended, with a lower token
	synViolations(t, CheckFencing(s.build(), synLimits()), 1, "token 3 of p1/op1", "not above token 5 of p0/op1")

	// Equal tokens do not grow either.
	s = newSynth(2)
	s.fenced(0, 5, 0, 10, 100)
	s.fenced(1, 5, 50, 150, 250)
	synViolations(t, CheckFencing(s.build(), synLimits()), 1, "token 5 of p1/op1")
}

func TestCheckFencingFlushResetsTokens(t *testing.T) {
	s := newSynth(2)
	s.fenced(0, 5, 0, 10, 100).synWrite(20, 30, 5, OutOK)
	s.fault(FaultFlush, "lock", 120, 121)
	// The counter starts over: token 1, refused by the register.
	s.fenced(1, 1, 150, 160, 250).synWrite(170, 180, 1, OutFail)
	r := CheckFencing(s.build(), synLimits())
	synPass(t, r)
	synNote(t, r, "1 acquisitions exempt from growing tokens")
	synNote(t, r, "1 refusals exempt")
}

// A FLUSHALL in flight when a hold was invoked may run after its token
// was drawn (the exclusion check's seed 139742775): that hold is not
// compared with holds after the flush. One that ended before the invoke
// cannot have reset the counter under it.
func TestCheckFencingFlushInFlight(t *testing.T) {
	for _, tc := range []struct {
		flushEnd float64
		pass     bool
	}{{106, true}, {101, false}} {
		s := newSynth(2)
		s.fault(FaultFlush, "lock", 100, tc.flushEnd)
		s.fenced(0, 5, 102, 103, 104)
		s.fenced(1, 1, 110, 112, 200)
		r := CheckFencing(s.build(), synLimits())
		if tc.pass {
			synPass(t, r)
			synNote(t, r, "1 acquisitions exempt from growing tokens")
		} else {
			synViolations(t, r, 1, "token 1 of p1/op1")
		}
	}
}

func TestCheckFencingStaleTokenAccepted(t *testing.T) {
	s := newSynth(2)
	s.fenced(0, 1, 0, 10, 300).synWrite(200, 210, 1, OutOK)
	s.fenced(1, 2, 0, 20, 100).synWrite(30, 40, 2, OutOK)
	r := CheckFencing(s.build(), synLimits())
	synViolations(t, r, 1, "stale token accepted: token 1 written at 200.0ms", "after token 2 was accepted at 30.0ms")

	// Concurrent writes may land in either order.
	s = newSynth(2)
	s.fenced(0, 1, 0, 10, 300).synWrite(30, 50, 1, OutOK)
	s.fenced(1, 2, 0, 20, 100).synWrite(30, 40, 2, OutOK)
	synPass(t, CheckFencing(s.build(), synLimits()))
}

func TestCheckFencingRefusalWithoutLoss(t *testing.T) {
	// Refused while its ctx never said the lock was lost.
	s := newSynth(2)
	s.fenced(0, 1, 0, 10, 300).synWrite(200, 210, 1, OutFail)
	s.fenced(1, 2, 0, 20, 100).synWrite(30, 40, 2, OutOK)
	synViolations(t, CheckFencing(s.build(), synLimits()), 1, "write of token 1 at 200.0ms..210.0ms refused", "never done")

	// Refused before the loss was reported.
	s = newSynth(2)
	s.fenced(0, 1, 0, 10, 300).synWrite(200, 210, 1, OutFail).synDone(290, "lockgen: f: renew: lock lost")
	s.fenced(1, 2, 0, 20, 100).synWrite(30, 40, 2, OutOK)
	synViolations(t, CheckFencing(s.build(), synLimits()), 1, "reported the loss only at 290.0ms, 80.0ms after the refusal")

	// Done for another cause (the caller's ctx): the lock was still held.
	s = newSynth(2)
	s.fenced(0, 1, 0, 10, 300).synWrite(200, 210, 1, OutFail).synDone(150, "context canceled")
	s.fenced(1, 2, 0, 20, 100).synWrite(30, 40, 2, OutOK)
	synViolations(t, CheckFencing(s.build(), synLimits()), 1, "for another cause")

	// Unless its release found the lock lost: the loss came after the
	// ctx was done, and could not be reported.
	s = newSynth(2)
	o := s.fenced(0, 1, 0, 10, 300).synWrite(200, 210, 1, OutFail).synDone(150, "context canceled")
	o.ReleaseErr = "lockgen: f: release: renew: lock lost"
	s.fenced(1, 2, 0, 20, 100).synWrite(30, 40, 2, OutOK)
	r := CheckFencing(s.build(), synLimits())
	synPass(t, r)
	synNote(t, r, "release found the lock lost")

	// Or unless the write came after its fixed lease ran out: no release
	// may ever tell (seed 209073245: its process was killed before it).
	for _, tc := range []struct {
		write float64
		pass  bool
	}{{115, true}, {105, false}} {
		s = newSynth(2)
		o = s.fenced(0, 1, 0, 10, -1).synWrite(tc.write, tc.write+5, 1, OutFail).synDone(50, "context canceled")
		o.Lease = tms(100)
		s.fenced(1, 2, 0, 112, 200).synWrite(113, 114, 2, OutOK)
		r = CheckFencing(s.build(), synLimits())
		if !tc.pass {
			synViolations(t, r, 1, "for another cause")
			continue
		}
		synPass(t, r)
		synNote(t, r, "made after its fixed lease ran out")
	}
}

func TestCheckFencingRefusalPaused(t *testing.T) {
	run := func(done float64) Result {
		s := newSynth(2)
		// p0 is frozen 100..500; after SIGCONT it writes before its late
		// timer reports the loss.
		s.fenced(0, 1, 0, 10, 700).synWrite(510, 520, 1, OutFail).synDone(done, "lockgen: f: lease: lock lost")
		s.fenced(1, 2, 0, 300, 400).synWrite(310, 320, 2, OutOK)
		s.fault(FaultPauseProcess, "p0", 100, 500)
		return CheckFencing(s.build(), synLimits())
	}
	synPass(t, run(600))                                    // 80ms after the refusal: within PauseSlack
	synViolations(t, run(690), 1, "reported the loss only") // 170ms: not
}

func TestCheckFencingDeadOnArrival(t *testing.T) {
	s := newSynth(2)
	// p1's acquisition reached Redis first (token 1) but its reply came
	// back after its lease ran out, and after p0's whole hold (token 2):
	// it returned with its ctx done.
	s.fenced(1, 1, 0, 300, 301).synDone(300.5, "lockgen: f: lease: lock lost")
	s.fenced(0, 2, 100, 110, 200)
	r := CheckFencing(s.build(), synLimits())
	synPass(t, r)
	synNote(t, r, "dead on arrival")
}

// A Shutdown of the hold's Client, by a goroutine sharing it, cuts the
// hold and gives its lock back: a later token is accepted and the
// holder's writes are refused (seed 479264011). Its ctx reports the cut,
// or, when the caller had cancelled it first, its release does.
func TestCheckFencingShutdownCut(t *testing.T) {
	const cut = "lockgen: f: shutdown: lock client shutting down: Shutdown's ctx ended before the hold was released"
	s := newSynth(2)
	s.fenced(0, 1, 0, 10, 300).synDone(100, cut).synWrite(210, 215, 1, OutFail)
	s.fenced(1, 2, 150, 160, 250).synWrite(170, 175, 2, OutOK)
	a := s.fenced(0, 3, 400, 410, 700).synDone(420, "context canceled").synWrite(610, 615, 3, OutFail)
	a.ReleaseErr = "lockgen: f: release: " + cut[len("lockgen: f: "):]
	s.fenced(1, 4, 500, 520, 600).synWrite(530, 535, 4, OutOK)
	r := CheckFencing(s.build(), synLimits())
	synPass(t, r)
	synNote(t, r, "1 refusals after the hold's ctx was done because its Client was closed or shut down")
	synNote(t, r, "1 refusals after the hold's ctx was done for another cause, of holds whose release found the lock lost or cut by a Shutdown")

	// A ctx cancelled by its caller, with nothing in the release, still
	// explains nothing.
	s = newSynth(2)
	s.fenced(0, 1, 0, 10, 300).synDone(100, "context canceled").synWrite(210, 215, 1, OutFail)
	s.fenced(1, 2, 150, 160, 250).synWrite(170, 175, 2, OutOK)
	synViolations(t, CheckFencing(s.build(), synLimits()), 1, "for another cause")
}
