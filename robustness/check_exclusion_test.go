package robustness

import (
	"testing"
	"time"
)

func TestCheckExclusionPassesHandOvers(t *testing.T) {
	s := newSynth(3)
	s.hold(0, KindReentrant, "re:0", 0, 10, 100)
	s.hold(1, KindReentrant, "re:0", 5, 101, 200) // waited, took it after the release
	s.hold(2, KindFair, "fair:0", 0, 10, 50)
	s.op(2, KindFair, FAcquire, "fair:0", 20, 25, OutOK, 1).Nested = true // a re-entry: the outer hold's
	s.hold(0, KindRead, "rw", 300, 310, 400)
	s.hold(1, KindRead, "rw", 300, 320, 420) // readers share
	s.hold(2, KindWrite, "rw", 305, 421, 500)
	s.hold(0, KindMultiAtomic, "m", 600, 610, 700) // re:0 and re:1
	s.hold(1, KindReentrant, "re:1", 650, 701, 800)
	s.hold(0, KindSemaphore, "sem", 0, 10, 500)
	s.hold(1, KindSemaphore, "sem", 0, 10, 500)
	s.hold(2, KindSemaphore, "sem", 0, 501, 600)
	s.op(2, KindReentrant, FAcquire, "re:0", 150, 160, OutFail, 0) // not acquired: no hold
	r := CheckExclusion(s.build(), synLimits())
	synPass(t, r)
	if r.Checked != 12 {
		t.Errorf("checked %d holds, want 12 (a multi hold once per member)", r.Checked)
	}
}

func TestCheckExclusionOverlap(t *testing.T) {
	s := newSynth(2)
	a := s.hold(0, KindReentrant, "re:0", 0, 10, 100)
	b := s.hold(1, KindReentrant, "re:0", 5, 60, 200)
	r := CheckExclusion(s.build(), synLimits())
	synViolations(t, r, 1, "re:0", "p0/op1", "p1/op1", "overlap for 40.0ms", "60.0ms")
	v := r.Violations[0]
	if len(v.Ops) != 2 || v.Ops[0] != a || v.Ops[1] != b {
		t.Errorf("ops %v, want both holds", v.Ops)
	}
	if v.From != tms(60) || v.To != tms(100) {
		t.Errorf("window %d..%d, want 60ms..100ms", v.From, v.To)
	}
}

func TestCheckExclusionDoneEndsHold(t *testing.T) {
	s := newSynth(2)
	s.hold(0, KindFenced, "f", 0, 10, 300).synDone(90, "lockgen: f: renew: lock lost")
	s.hold(1, KindFenced, "f", 5, 100, 200)
	synPass(t, CheckExclusion(s.build(), synLimits()))
}

func TestCheckExclusionReaderWriter(t *testing.T) {
	s := newSynth(3)
	s.hold(0, KindRead, "rw", 0, 10, 100)
	s.hold(1, KindRead, "rw", 0, 20, 100)
	s.hold(2, KindWrite, "rw", 0, 50, 150)
	r := CheckExclusion(s.build(), synLimits())
	synViolations(t, r, 2, "rw", "write acquire", "read acquire")
}

func TestCheckExclusionSemaphoreOverPermits(t *testing.T) {
	s := newSynth(3)
	s.hold(0, KindSemaphore, "sem", 0, 10, 100)
	s.hold(1, KindSemaphore, "sem", 0, 20, 100)
	s.hold(2, KindSemaphore, "sem", 0, 30, 100)
	r := CheckExclusion(s.build(), synLimits())
	synViolations(t, r, 1, "semaphore sem", "3 permits held at 30.0ms, it has 2")

	// Two permits in one hold count twice.
	s = newSynth(2)
	s.hold(0, KindSemaphore, "sem", 0, 10, 100).N = 2
	s.hold(1, KindSemaphore, "sem", 0, 20, 100)
	synViolations(t, CheckExclusion(s.build(), synLimits()), 1, "3 permits held")

	// Unknown permits: a note, not a pass in silence.
	s = newSynth(1)
	s.hold(0, KindSemaphore, "other", 0, 10, 100)
	synNote(t, CheckExclusion(s.build(), synLimits()), "semaphore other: permits unknown")
}

func TestCheckExclusionMultiMember(t *testing.T) {
	s := newSynth(2)
	s.hold(0, KindMulti, "multi", 0, 10, 100) // holds re:0 and re:1
	s.hold(1, KindReentrant, "re:1", 0, 50, 150)
	synViolations(t, CheckExclusion(s.build(), synLimits()), 1, "key re:1", "multi acquire [re:0,re:1]", "reentrant acquire re:1")

	// Two multis sharing a member.
	s = newSynth(2)
	s.hold(0, KindMulti, "multi", 0, 10, 100)
	m := s.hold(1, KindMultiAtomic, "multi-atomic", 0, 50, 150)
	m.Keys = []string{"re:1", "re:7"}
	synViolations(t, CheckExclusion(s.build(), synLimits()), 1, "key re:1")
}

// A process that did not run (a stall its own watcher recorded: the OS
// gave both cores to others) is a paused holder too: its lease timer fired
// 75 ms late in seed 607796633 of a 30-minute run on a loaded box, after
// another owner took the lock; without the stall on record it is an
// overlap.
func TestCheckExclusionStalledHolder(t *testing.T) {
	run := func(stalled bool) Result {
		s := newSynth(2)
		s.hold(0, KindRead, "rw:0", 0, 10, 176).synDone(175, "lockgen: rw:0: lease: lock lost")
		s.hold(1, KindWrite, "rw:0", 20, 160, 170)
		if stalled {
			s.fault(FaultStall, "p0", 90, 170)
		}
		return CheckExclusion(s.build(), synLimits())
	}
	r := run(true)
	synPass(t, r)
	synNote(t, r, "paused")
	synViolations(t, run(false), 1, "overlap")
}

func TestCheckExclusionPausedHolder(t *testing.T) {
	run := func(done float64) Result {
		s := newSynth(2)
		// p0 holds from 10; it is frozen 100..500; its lease runs out and
		// p1 takes the lock at 300; p0's timer fires after SIGCONT.
		s.hold(0, KindReentrant, "re:0", 0, 10, done+1).synDone(done, "lockgen: re:0: lease: lock lost")
		s.hold(1, KindReentrant, "re:0", 20, 300, 400)
		s.fault(FaultPauseProcess, "p0", 100, 500)
		return CheckExclusion(s.build(), synLimits())
	}
	r := run(600) // within PauseSlack (150ms) of SIGCONT
	synPass(t, r)
	synNote(t, r, "1 overlaps exempt", "paused")

	synViolations(t, run(700), 1, "p0 was paused 100.0ms..500.0ms", "200.0ms after SIGCONT") // too late

	// A pause of another process exempts nothing.
	s := newSynth(2)
	s.hold(0, KindReentrant, "re:0", 0, 10, 601).synDone(600, "lock lost")
	s.hold(1, KindReentrant, "re:0", 20, 300, 400)
	s.fault(FaultPauseProcess, "p1", 450, 500)
	synViolations(t, CheckExclusion(s.build(), synLimits()), 1, "overlap")
}

func TestCheckExclusionFlush(t *testing.T) {
	lim := synLimits() // Watchdog 2s, PauseSlack 150ms
	run := func(lease time.Duration, done float64) Result {
		s := newSynth(2)
		a := s.hold(0, KindReentrant, "re:0", 0, 10, done+1).synDone(done, "lockgen: re:0: renew: lock lost")
		a.Lease = int64(lease)
		s.hold(1, KindReentrant, "re:0", 150, 200, 300) // after the flush forgot p0's hold
		s.fault(FaultFlush, "lock", 100, 101)
		return CheckExclusion(s.build(), lim)
	}
	// A watchdog hold learns at its next renewal: within Watchdog (+slack).
	r := run(0, 1500)
	synPass(t, r)
	synNote(t, r, "1 overlaps exempt", "flush")
	synViolations(t, run(0, 2400), 1, "did not learn of the flush within its renewal", "bound 2.15s")
	// A fixed-lease hold learns when its lease ends.
	synPass(t, run(time.Second, 1000))
	synViolations(t, run(time.Second, 1200), 1, "did not learn of the flush", "bound 1s")

	// A flush of a RedLock node does not excuse a lock on the lock server.
	s := newSynth(2)
	s.hold(0, KindReentrant, "re:0", 0, 10, 1500)
	s.hold(1, KindReentrant, "re:0", 150, 200, 300)
	s.fault(FaultFlush, "red1", 100, 101)
	synViolations(t, CheckExclusion(s.build(), lim), 1, "overlap")

	// Nor does a flush before both acquisitions.
	s = newSynth(2)
	s.fault(FaultFlush, "lock", 0, 1)
	s.hold(0, KindReentrant, "re:0", 5, 10, 1500)
	s.hold(1, KindReentrant, "re:0", 150, 200, 300)
	synViolations(t, CheckExclusion(s.build(), lim), 1, "overlap")

	// But a FLUSHALL in flight when the first acquire was invoked may run
	// after it (seed 139742775: FLUSHALL sent at 5863.8 ms, answered at
	// 5868.9 ms; an acquire of 2 permits invoked at 5866.1 ms returned at
	// 5867.1 ms, and the permits it took were flushed).
	s = newSynth(2)
	s.fault(FaultFlush, "lock", 100, 106)
	s.hold(0, KindReentrant, "re:0", 102, 103, 350).synDone(350, "lockgen: re:0: renew: lock lost")
	s.hold(1, KindReentrant, "re:0", 110, 113, 300)
	synPass(t, CheckExclusion(s.build(), lim))
	// The hold Redis forgot may be the one whose acquire returned later:
	// its script ran before the flush, its reply came after the other's
	// acquisition (seed 213947801: a multi-lock [fair:0,re:1] took fair:0,
	// waited for re:1 across a FLUSHALL, returned 8 ms after another owner
	// took fair:0, and learnt of the loss 110 ms later).
	s = newSynth(2)
	s.hold(0, KindReentrant, "re:0", 50, 160, 300).synDone(270, "lockgen: re:0: renew: lock lost")
	s.fault(FaultFlush, "lock", 100, 106)
	s.hold(1, KindReentrant, "re:0", 150, 152, 900)
	synPass(t, CheckExclusion(s.build(), lim))
	s = newSynth(2) // but not one that never learnt
	s.hold(0, KindReentrant, "re:0", 50, 160, 5000)
	s.fault(FaultFlush, "lock", 100, 106)
	s.hold(1, KindReentrant, "re:0", 150, 152, 900)
	synViolations(t, CheckExclusion(s.build(), lim), 1, "overlap")
	s = newSynth(2) // one that ended before it was invoked cannot
	s.fault(FaultFlush, "lock", 100, 101)
	s.hold(0, KindReentrant, "re:0", 102, 103, 350).synDone(350, "lockgen: re:0: renew: lock lost")
	s.hold(1, KindReentrant, "re:0", 110, 113, 300)
	synViolations(t, CheckExclusion(s.build(), lim), 1, "overlap")

	// Within the same bound only.
	overlapping := func(done float64) Result {
		s := newSynth(2)
		s.fault(FaultFlush, "lock", 0, 8)
		s.hold(0, KindReentrant, "re:0", 5, 6, done+1).synDone(done, "lockgen: re:0: renew: lock lost")
		s.hold(1, KindReentrant, "re:0", 150, 200, 300)
		return CheckExclusion(s.build(), lim)
	}
	synPass(t, overlapping(1500))
	synViolations(t, overlapping(2400), 1, "did not learn of the flush within its renewal")
}

func TestCheckExclusionSemaphoreFlush(t *testing.T) {
	s := newSynth(3)
	s.hold(0, KindSemaphore, "sem", 0, 10, 1001).synDone(1000, "lock lost")
	s.hold(1, KindSemaphore, "sem", 0, 10, 1001).synDone(1000, "lock lost")
	s.fault(FaultFlush, "lock", 100, 101)
	s.hold(2, KindSemaphore, "sem", 150, 200, 300) // the counter was set afresh
	r := CheckExclusion(s.build(), synLimits())
	synPass(t, r)
	synNote(t, r, "flush")

	// The hold Redis forgot may be the one whose acquire returned later
	// (seed 30068944: p7's acquire of 1 permit, invoked just before a
	// FLUSHALL, its reply delayed by latency past another's acquire of
	// both permits after the flush; p7's release found its permit gone).
	later := func(end float64) Result {
		s := newSynth(2)
		s.hold(0, KindSemaphore, "sem", 0, 60, end)
		s.fault(FaultFlush, "lock", 1, 2)
		s.hold(1, KindSemaphore, "sem", 20, 21, 130).N = 2
		return CheckExclusion(s.build(), synLimits())
	}
	synPass(t, later(62))
	synViolations(t, later(5000), 1, "3 permits held")
}

func TestCheckExclusionDeadOnArrival(t *testing.T) {
	s := newSynth(2)
	s.hold(0, KindReentrant, "re:0", 0, 10, 300)
	// Its reply came after its deadline: it returned with its ctx done.
	s.hold(1, KindReentrant, "re:0", 0, 100, 101).synDone(100.2, "lockgen: re:0: lease: lock lost")
	r := CheckExclusion(s.build(), synLimits())
	synPass(t, r)
	synNote(t, r, "dead on arrival")

	// A hold that ended as soon for another cause was alive: the caller
	// gave up on it.
	s = newSynth(2)
	s.hold(0, KindReentrant, "re:0", 0, 10, 300)
	s.hold(1, KindReentrant, "re:0", 0, 100, 101).synDone(100.2, "context canceled")
	synViolations(t, CheckExclusion(s.build(), synLimits()), 1, "overlap for 0.2ms")

	// So was one that wrote before its loss was recorded.
	s = newSynth(2)
	s.hold(0, KindReentrant, "re:0", 0, 10, 300)
	s.hold(1, KindReentrant, "re:0", 0, 100, 101).synDone(100.5, "lockgen: re:0: lease: lock lost").synWrite(100.1, 100.3, 0, OutOK)
	synViolations(t, CheckExclusion(s.build(), synLimits()), 1, "overlap for 0.5ms")
}

func TestCheckExclusionKilledHolder(t *testing.T) {
	s := newSynth(2)
	s.h.Processes[0].Exit, s.h.Processes[0].Err = tms(205), "signal: killed"
	s.hold(0, KindReentrant, "re:0", 0, 10, -1) // never released: killed at 200
	s.hold(1, KindReentrant, "re:0", 20, 2300, 2400)
	s.fault(FaultKillProcess, "p0", 200, 205)
	synPass(t, CheckExclusion(s.build(), synLimits()))

	// A holder that never ended while its process lived on overlaps.
	s = newSynth(2)
	s.hold(0, KindReentrant, "re:0", 0, 10, -1)
	s.hold(1, KindReentrant, "re:0", 20, 2300, 2400)
	synViolations(t, CheckExclusion(s.build(), synLimits()), 1, "overlap")
}

// TestCheckExclusionFromEvents runs the checker on a history put together
// by Build from recorded events, as the harness does.
func TestCheckExclusionFromEvents(t *testing.T) {
	ev := []Event{
		{T: tms(0), Proc: 0, Ev: EvProcess}, {T: tms(0), Proc: 1, Ev: EvProcess},
		{T: tms(1), Proc: 0, Op: 1, Ev: EvInvoke, Kind: KindWrite, F: FAcquire, Key: "rw"},
		{T: tms(2), Proc: 0, Op: 1, Ev: EvReturn, Outcome: OutOK},
		{T: tms(3), Proc: 1, Op: 1, Ev: EvInvoke, Kind: KindRead, F: FAcquire, Key: "rw"},
		{T: tms(4), Proc: 1, Op: 1, Ev: EvReturn, Outcome: OutOK},
		{T: tms(5), Proc: 0, Op: 1, Ev: EvRelease},
		{T: tms(6), Proc: 0, Op: 1, Ev: EvReleased, Outcome: OutOK},
		{T: tms(7), Proc: 1, Op: 1, Ev: EvRelease},
		{T: tms(8), Proc: 1, Op: 1, Ev: EvReleased, Outcome: OutOK},
		{T: tms(9), Proc: 0, Ev: EvExit, Outcome: OutOK}, {T: tms(9), Proc: 1, Ev: EvExit, Outcome: OutOK},
	}
	r := CheckExclusion(Build(1, ev), synLimits())
	synViolations(t, r, 1, "p0/op1 write acquire rw held 2.0ms..5.0ms", "p1/op1 read acquire rw held 4.0ms..7.0ms", "overlap for 1.0ms")
}

// TestCheckExclusionLarge keeps the sweep linear in the holds: 100k
// hand-overs check in well under a second.
func TestCheckExclusionLarge(t *testing.T) {
	s := newSynth(4)
	for i := range 100_000 {
		base := float64(i) * 10
		s.hold(i%4, KindReentrant, "re:0", base, base+1, base+9)
	}
	h := s.build()
	start := time.Now()
	r := CheckExclusion(h, synLimits())
	synPass(t, r)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("100k holds took %v", d)
	}
}
