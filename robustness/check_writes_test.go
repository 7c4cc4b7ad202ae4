package robustness

import "testing"

func TestCheckWritesPassesChain(t *testing.T) {
	s := newSynth(3)
	s.hold(0, KindReentrant, "re:0", 0, 10, 100).synWrite(20, 30, 0, OutOK).synWrite(40, 50, 1, OutOK)
	s.hold(1, KindReentrant, "re:0", 0, 110, 200).synWrite(120, 130, 2, OutOK).synWrite(140, 150, 3, OutUnknown)
	s.hold(2, KindMulti, "multi", 0, 210, 300).synWrite(220, 230, 3, OutOK) // re:0 is its first member
	s.hold(0, KindWrite, "rw", 0, 10, 100).synWrite(20, 30, 0, OutOK)       // another counter
	s.hold(1, KindFenced, "f", 0, 10, 100).synWrite(20, 30, 7, OutOK)       // a fenced register: not a counter
	r := CheckWrites(s.build(), synLimits())
	synPass(t, r)
	if r.Checked != 5 {
		t.Errorf("checked %d writes, want the 5 ok counter writes", r.Checked)
	}
}

func TestCheckWritesLostUpdate(t *testing.T) {
	s := newSynth(2)
	s.hold(0, KindReentrant, "re:0", 0, 10, 100).synWrite(20, 30, 5, OutOK)
	s.hold(1, KindReentrant, "re:0", 0, 15, 100).synWrite(25, 35, 5, OutOK)
	synViolations(t, CheckWrites(s.build(), synLimits()), 1, "counter re:0: lost update", "both read 5", "p0/op1", "p1/op1")

	// A multi-lock's writes go to its first member's counter.
	s = newSynth(2)
	s.hold(0, KindMultiAtomic, "multi-atomic", 0, 10, 100).synWrite(20, 30, 5, OutOK)
	s.hold(1, KindReentrant, "re:0", 0, 110, 200).synWrite(120, 130, 5, OutOK)
	synViolations(t, CheckWrites(s.build(), synLimits()), 1, "counter re:0: lost update")
}

func TestCheckWritesOutsideHold(t *testing.T) {
	s := newSynth(1)
	s.hold(0, KindReentrant, "re:0", 0, 10, 100).synDone(50, "lockgen: re:0: renew: lock lost").synWrite(60, 70, 0, OutOK)
	synViolations(t, CheckWrites(s.build(), synLimits()), 1, "write at 60.0ms..70.0ms (read 0) outside its hold", "held 10.0ms..50.0ms")
}

func TestCheckWritesPausedHolder(t *testing.T) {
	run := func(write float64) Result {
		s := newSynth(2)
		// p0 is frozen 100..500 with the lock; p1 takes it at 300; after
		// SIGCONT p0 writes before its late timer ends the hold.
		s.hold(0, KindReentrant, "re:0", 0, 10, 560).synDone(550, "lock lost").synWrite(20, 30, 0, OutOK).synWrite(write, write+5, 1, OutOK)
		s.hold(1, KindReentrant, "re:0", 0, 300, 400).synWrite(310, 320, 1, OutOK)
		s.fault(FaultPauseProcess, "p0", 100, 500)
		return CheckWrites(s.build(), synLimits())
	}
	r := run(510)
	synPass(t, r)
	synNote(t, r, "paused holder")
	synNote(t, r, "after SIGCONT")

	// Without the pause the same shape is a lost update and a write
	// outside a hold.
	s := newSynth(2)
	s.hold(0, KindReentrant, "re:0", 0, 10, 560).synDone(250, "lock lost").synWrite(20, 30, 0, OutOK).synWrite(510, 515, 1, OutOK)
	s.hold(1, KindReentrant, "re:0", 0, 300, 400).synWrite(310, 320, 1, OutOK)
	r = CheckWrites(s.build(), synLimits())
	if len(r.Violations) != 2 {
		t.Fatalf("want a write outside its hold and a lost update, got %v", r.Violations)
	}
}

// Found by the suite (seed 51929888): SIGSTOP froze a holder between the
// read and the write of its read-modify-write; another owner took the
// lock, read the same value and wrote; the frozen write landed after
// SIGCONT. The write began inside the hold, and no lock service can stop
// a frozen process (fencing can): a paused holder, not a lost update.
func TestCheckWritesPausedInTheMiddleOfAWrite(t *testing.T) {
	s := newSynth(2)
	s.hold(0, KindWrite, "rw:0", 0, 10, 2900).synDone(2900, "lock lost").synWrite(69, 2870, 312, OutOK)
	s.hold(1, KindWrite, "rw:0", 0, 2000, 2020).synWrite(2005, 2010, 312, OutOK)
	s.fault(FaultPauseProcess, "p0", 70, 2860)
	r := CheckWrites(s.build(), synLimits())
	synPass(t, r)
	synNote(t, r, "paused holder")
}

// Found by the suite (seed 295086183): a holder frozen between its read
// (312) and its write lands the write after SIGCONT and sets the counter
// back to 313, though others counted it on to 320 meanwhile; the holders
// after it read 313 again. Their duplicate reads are the paused write's
// doing, not an overlap of theirs.
func TestCheckWritesPausedWriteRewindsTheCounter(t *testing.T) {
	run := func(pause bool) Result {
		s := newSynth(4)
		s.hold(0, KindWrite, "rw:0", 0, 10, 2900).synDone(2900, "lock lost").synWrite(69, 2870, 312, OutOK)
		s.hold(1, KindWrite, "rw:0", 0, 2000, 2020).synWrite(2005, 2010, 312, OutOK).synWrite(2011, 2012, 313, OutOK)
		s.hold(2, KindWrite, "rw:0", 0, 2100, 2200).synWrite(2110, 2120, 314, OutOK)
		s.hold(3, KindWrite, "rw:0", 0, 3000, 3100).synWrite(3010, 3020, 313, OutOK).synWrite(3030, 3040, 314, OutOK)
		if pause {
			s.fault(FaultPauseProcess, "p0", 70, 2860)
		}
		return CheckWrites(s.build(), synLimits())
	}
	r := run(true)
	synPass(t, r)
	synNote(t, r, "set the counter back")
	// Without the pause, p0's write is a lost update, and so are p3's reads.
	if r := run(false); len(r.Violations) < 3 {
		t.Fatalf("without the pause: %d violations, want p0's and p3's duplicate reads", len(r.Violations))
	}
}

// Found by the suite (seed 204502176): the paused holder's late write set
// the counter back while one hold was counting it on, so that hold read
// the same values twice; the rewind explains it, and without the pause
// it is a lost update.
func TestCheckWritesPausedWriteRewindsTheCounterUnderOneHold(t *testing.T) {
	run := func(pause bool) Result {
		s := newSynth(2)
		s.hold(0, KindWrite, "rw:0", 0, 10, 2900).synDone(2900, "lock lost").synWrite(69, 2870, 312, OutOK)
		s.hold(1, KindWrite, "rw:0", 0, 2000, 3100).
			synWrite(2005, 2010, 312, OutOK).synWrite(2011, 2012, 313, OutOK).synWrite(2013, 2014, 314, OutOK).
			synWrite(3010, 3020, 313, OutOK).synWrite(3030, 3040, 314, OutOK)
		if pause {
			s.fault(FaultPauseProcess, "p0", 70, 2860)
		}
		return CheckWrites(s.build(), synLimits())
	}
	r := run(true)
	synPass(t, r)
	synNote(t, r, "set the counter back")
	synViolations(t, run(false), 3, "lost update") // p0 and p1 both read 312, and p1 read 313 and 314 twice
}

func TestCheckWritesFlush(t *testing.T) {
	run := func(done float64) Result {
		s := newSynth(2)
		s.hold(0, KindReentrant, "re:0", 0, 10, done+1).synDone(done, "lock lost").synWrite(20, 30, 0, OutOK).synWrite(160, 170, 1, OutOK)
		s.hold(1, KindReentrant, "re:0", 120, 150, 400).synWrite(155, 165, 1, OutOK)
		s.fault(FaultFlush, "lock", 100, 101)
		return CheckWrites(s.build(), synLimits())
	}
	r := run(500) // the holder learnt of the flush within its renewal
	synPass(t, r)
	synNote(t, r, "flush")
	synViolations(t, run(3000), 1, "lost update") // it did not
}

func TestCheckWritesShortHold(t *testing.T) {
	// The caller gave up on the hold right after a write: a short hold,
	// not one that was dead on arrival.
	s := newSynth(1)
	s.hold(0, KindReentrant, "re:0", 0, 10, 12).synWrite(10.1, 10.6, 0, OutOK).synDone(10.8, "context canceled")
	s.hold(0, KindWrite, "rw:0", 0, 10, 12).synWrite(10.1, 10.6, 0, OutOK).synDone(10.8, "lockgen: rw:0: renew: lock lost")
	synPass(t, CheckWrites(s.build(), synLimits()))
}

// Found by the suite (seed 38873113): a holder checked its ctx and read
// the counter 5.6 ms before its fixed lease ran out; the storage was slow
// on a loaded box, and its write came back 94 ms later. The next owner,
// granted 11 ms after the end, read the same value. The holds did not
// overlap: a write in flight at its hold's end, not a lost update. A
// write that read the same value under a hold that began before the
// other ended is still one.
func TestCheckWritesInFlightWhenItsHoldEnded(t *testing.T) {
	run := func(second float64) Result {
		s := newSynth(2)
		s.hold(0, KindReentrant, "re:0", 0, 10, 600).synDone(439.9, "lockgen: re:0: renew: lock lost: fixed lease ran out").synWrite(434.3, 528.8, 348, OutOK)
		s.hold(1, KindMultiAtomic, "multi-atomic", 0, second, 600).synWrite(second, 526.3, 348, OutOK)
		return CheckWrites(s.build(), synLimits())
	}
	r := run(450.9)
	synPass(t, r)
	synNote(t, r, "in flight when its hold ended")

	synViolations(t, run(430), 1, "lost update", "both read 348")

	// A write that returned before its hold ended explains nothing.
	s := newSynth(2)
	s.hold(0, KindReentrant, "re:0", 0, 10, 600).synDone(439.9, "lock lost").synWrite(434.3, 436, 348, OutOK)
	s.hold(1, KindReentrant, "re:0", 0, 450.9, 600).synWrite(450.9, 460, 348, OutOK)
	synViolations(t, CheckWrites(s.build(), synLimits()), 1, "lost update")
}
