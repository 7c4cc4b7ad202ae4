package robustness

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// latch adds a latch op on "latch".
func (s *synth) latch(proc int, f string, inv, ret float64, out string, n int64) *Op {
	return s.op(proc, KindLatch, f, "latch", inv, ret, out, n)
}

// plain adds a plain-semaphore op on "plain".
func (s *synth) plain(proc int, f string, inv, ret float64, out string, n int64) *Op {
	return s.op(proc, KindPlain, f, "plain", inv, ret, out, n)
}

func TestCheckLinearLatch(t *testing.T) {
	s := newSynth(3)
	s.latch(0, FAwait, 0, 5, OutOK, 0) // not armed: released
	s.latch(0, FSetCount, 10, 20, OutOK, 3)
	s.latch(1, FSetCount, 15, 25, OutFail, 3) // armed already
	s.latch(2, FAwait, 21, 300, OutFail, 0)   // not released within its wait
	s.latch(0, FCountDown, 30, 40, OutOK, 0)
	s.latch(1, FCount, 50, 60, OutOK, 2)
	s.latch(0, FCountDown, 70, 80, OutOK, 0)
	s.latch(1, FCountDown, 70, 90, OutOK, 0)
	s.latch(1, FCount, 100, 110, OutOK, 0)
	s.latch(0, FCountDown, 120, 130, OutOK, 0) // on a latch not armed: nothing
	s.latch(2, FAwait, 350, 360, OutOK, 0)
	r := CheckLinearizable(s.build(), synLimits(), "")
	synPass(t, r)
	if r.Checked != 11 {
		t.Errorf("checked %d ops, want 11", r.Checked)
	}
}

func TestCheckLinearLatchIllegal(t *testing.T) {
	dir := t.TempDir()
	s := newSynth(2)
	s.latch(0, FSetCount, 10, 20, OutOK, 3)
	s.latch(1, FCount, 30, 40, OutOK, 2) // no count-down yet
	s.latch(0, FCountDown, 50, 60, OutOK, 0)
	r := CheckLinearizable(s.build(), synLimits(), dir)
	synViolations(t, r, 1, "latch latch: not linearizable", "p1/op1 count() -> 2", "linear-latch-latch.html")
	v := r.Violations[0]
	if len(v.Files) != 1 {
		t.Fatalf("files %v, want the visualization", v.Files)
	}
	b, err := os.ReadFile(v.Files[0])
	if err != nil || !strings.Contains(string(b), "<html") {
		t.Errorf("visualization %s: %v, %d bytes", v.Files[0], err, len(b))
	}
	if len(v.Ops) == 0 || v.Ops[len(v.Ops)-1].F != FCount {
		t.Errorf("ops %v, want the count that no linearization gets past", v.Ops)
	}

	// An await that returned while the latch was armed throughout.
	s = newSynth(2)
	s.latch(0, FSetCount, 10, 20, OutOK, 3)
	s.latch(1, FAwait, 30, 40, OutOK, 0)
	synViolations(t, CheckLinearizable(s.build(), synLimits(), ""), 1, "await() -> ok")
}

func TestCheckLinearLatchUnknown(t *testing.T) {
	// A count-down whose reply was lost may have counted: either read
	// after it is linearizable, as is a later one.
	for _, n := range []int64{3, 2} {
		s := newSynth(2)
		s.latch(0, FSetCount, 10, 20, OutOK, 3)
		s.latch(1, FCountDown, 30, 40, OutUnknown, 0).Err = "lockgen: latch: outcome unknown: i/o timeout"
		s.latch(0, FCount, 50, 60, OutOK, n)
		s.latch(0, FCount, 70, 80, OutOK, 2) // it took effect late
		r := CheckLinearizable(s.build(), synLimits(), "")
		synPass(t, r)
		synNote(t, r, "1 ops of unknown outcome")
	}
	// But not a count it could never explain.
	s := newSynth(2)
	s.latch(0, FSetCount, 10, 20, OutOK, 3)
	s.latch(1, FCountDown, 30, -1, OutUnknown, 0) // never returned
	s.latch(0, FCount, 50, 60, OutOK, 1)
	synViolations(t, CheckLinearizable(s.build(), synLimits(), ""), 1, "not linearizable")
}

func TestCheckLinearLatchFlush(t *testing.T) {
	s := newSynth(2)
	s.latch(0, FSetCount, 10, 20, OutOK, 3)
	s.fault(FaultFlush, "lock", 30, 31)
	s.latch(1, FCount, 40, 50, OutOK, 0)
	s.latch(1, FSetCount, 60, 70, OutOK, 3) // armed afresh
	synPass(t, CheckLinearizable(s.build(), synLimits(), ""))

	s = newSynth(2)
	s.latch(0, FSetCount, 10, 20, OutOK, 3)
	s.fault(FaultFlush, "red0", 30, 31) // another server
	s.latch(1, FCount, 40, 50, OutOK, 0)
	synViolations(t, CheckLinearizable(s.build(), synLimits(), ""), 1, "count() -> 0")
}

func TestCheckLinearPlainSemaphore(t *testing.T) {
	s := newSynth(3)
	s.plain(0, FAvailable, 0, 5, OutOK, 0)  // absent reads 0
	s.plain(0, FAcquire, 6, 8, OutFail, 1)  // absent: nothing to take
	s.plain(0, FSetCount, 10, 20, OutOK, 2) // TrySetPermits
	s.plain(1, FSetCount, 15, 25, OutFail, 2)
	s.plain(1, FAcquire, 30, 40, OutOK, 2)
	s.plain(2, FAcquire, 41, 50, OutFail, 1) // none free
	s.plain(0, FAvailable, 51, 55, OutOK, 0)
	s.plain(1, FRelease, 60, 70, OutOK, 2)
	s.plain(2, FAcquire, 65, 80, OutOK, 1) // waited for the release
	s.plain(0, FAvailable, 90, 95, OutOK, 1)
	s.plain(2, FAcquire, 100, 110, OutUnknown, 1).Err = "lockgen: plain: acquire: lock client closed" // never tried
	s.plain(0, FAvailable, 120, 125, OutOK, 1)
	r := CheckLinearizable(s.build(), synLimits(), "")
	synPass(t, r)
	synNote(t, r, "1 ops left out")
}

func TestCheckLinearPlainReleaseCreates(t *testing.T) {
	// Redisson's release INCRBYs an absent count, creating it; then
	// TrySetPermits finds it present.
	s := newSynth(2)
	s.plain(0, FRelease, 0, 10, OutOK, 1)
	s.plain(1, FAvailable, 20, 30, OutOK, 1)
	s.plain(1, FSetCount, 40, 50, OutFail, 2)
	synPass(t, CheckLinearizable(s.build(), synLimits(), ""))
}

func TestCheckLinearPlainSemaphoreIllegal(t *testing.T) {
	s := newSynth(3)
	s.plain(0, FSetCount, 10, 20, OutOK, 2)
	s.plain(1, FAcquire, 30, 40, OutOK, 2)
	s.plain(2, FAcquire, 50, 60, OutOK, 1) // over the permits
	synViolations(t, CheckLinearizable(s.build(), synLimits(), ""), 1, "plain-semaphore plain: not linearizable", "acquire(1) -> ok")

	// A flush forgets the count: an acquire after it cannot succeed.
	s = newSynth(2)
	s.plain(0, FSetCount, 10, 20, OutOK, 2)
	s.fault(FaultFlush, "lock", 25, 26)
	s.plain(1, FAcquire, 30, 40, OutOK, 1)
	synViolations(t, CheckLinearizable(s.build(), synLimits(), ""), 1, "acquire(1) -> ok")
}

// The shape of seeds 894065795, 131126803 and 327528677: an acquire whose
// reply was lost and that was sent again took its permits twice but was
// reported once (ok). The model rejects that, and accepts what the runtime
// reports since (ErrOutcomeUnknown, and the call stops there). A restart
// of the lock server is not data loss (its append-only file is fsynced
// before each reply): the model does not let it give back a permit.
func TestCheckLinearPlainSemaphoreLostReply(t *testing.T) {
	s := newSynth(2)
	s.plain(0, FSetCount, 10, 20, OutOK, 2)
	s.plain(1, FAcquire, 30, 60, OutOK, 1) // took 1 twice
	s.plain(1, FRelease, 70, 80, OutOK, 1)
	s.plain(0, FAvailable, 90, 95, OutOK, 1)
	synViolations(t, CheckLinearizable(s.build(), synLimits(), ""), 1, "available() -> 1")

	for _, n := range []int64{1, 2} { // it took effect, or not
		s = newSynth(2)
		s.plain(0, FSetCount, 10, 20, OutOK, 2)
		s.plain(1, FAcquire, 30, 60, OutUnknown, 1).Err = "lockgen: plain (plain): acquire: outcome unknown: redis unreachable: read: connection reset by peer"
		s.plain(0, FAvailable, 90, 95, OutOK, n)
		r := CheckLinearizable(s.build(), synLimits(), "")
		synPass(t, r)
		synNote(t, r, "1 ops of unknown outcome")
	}

	s = newSynth(2)
	s.plain(0, FSetCount, 10, 20, OutOK, 2)
	s.plain(1, FAcquire, 30, 40, OutOK, 1)
	s.fault(FaultRestart, "lock", 50, 60)
	s.plain(0, FAvailable, 70, 75, OutOK, 2)
	synViolations(t, CheckLinearizable(s.build(), synLimits(), ""), 1, "available() -> 2")
}

// The shape of seed 644349093: an acquire abandoned at its deadline (a
// go-redis client with default options) whose late reply took a permit,
// which the runtime gave back later (runtime/late.go). Meanwhile another
// acquire found too few; after, all were free again. Only an abandoned
// acquire may be taken for a while and given back: one whose reply was
// lost took its permit for good, or never.
func TestCheckLinearPlainSemaphoreAbandonedGivesBack(t *testing.T) {
	const abandoned = "lockgen: plain (plain:0): acquire: redis unavailable: outcome unknown: redis unreachable: no reply by the end of the call (the command may still run): context deadline exceeded"
	const lost = "lockgen: plain (plain): acquire: outcome unknown: redis unreachable: read: connection reset by peer"
	for _, c := range []struct {
		err  string
		pass bool
	}{{abandoned, true}, {lost, false}} {
		s := newSynth(3)
		s.plain(0, FSetCount, 10, 20, OutOK, 2)
		s.plain(1, FAcquire, 30, 40, OutUnknown, 1).Err = c.err
		s.plain(2, FAcquire, 50, 60, OutFail, 2) // the late reply holds one
		s.plain(2, FAcquire, 70, 80, OutOK, 2)   // given back by then
		r := CheckLinearizable(s.build(), synLimits(), "")
		if c.pass {
			synPass(t, r)
			continue
		}
		synViolations(t, r, 1, "acquire(2) -> ok")
	}

	// A give-back owes what was taken, no more.
	s := newSynth(3)
	s.plain(0, FSetCount, 10, 20, OutOK, 2)
	s.plain(1, FAcquire, 30, 40, OutUnknown, 1).Err = abandoned
	s.plain(2, FAcquire, 50, 60, OutOK, 2)
	s.plain(0, FAvailable, 70, 80, OutOK, 1) // a permit from nowhere
	synViolations(t, CheckLinearizable(s.build(), synLimits(), ""), 1, "available() -> 1")
}

func TestCheckLinearFencedRegister(t *testing.T) {
	s := newSynth(2)
	s.hold(0, KindFenced, "f", 0, 10, 100).synWrite(20, 30, 1, OutOK).synWrite(150, 160, 1, OutFail)
	s.hold(1, KindFenced, "f", 0, 110, 200).synWrite(120, 130, 2, OutOK).synWrite(170, 180, 2, OutOK).synWrite(190, -1, 2, OutUnknown)
	synPass(t, CheckLinearizable(s.build(), synLimits(), ""))

	s = newSynth(2)
	s.hold(0, KindFenced, "f", 0, 10, 300).synWrite(150, 160, 1, OutOK) // accepted after 2
	s.hold(1, KindFenced, "f", 0, 110, 200).synWrite(120, 130, 2, OutOK)
	synViolations(t, CheckLinearizable(s.build(), synLimits(), ""), 1, "fenced f: not linearizable", "write(1) -> ok")

	s = newSynth(1)
	s.hold(0, KindFenced, "f", 0, 10, 300).synWrite(20, 30, 1, OutFail) // refused with nothing accepted
	synViolations(t, CheckLinearizable(s.build(), synLimits(), ""), 1, "write(1) -> fail")
}

func TestCheckLinearWriteHTML(t *testing.T) {
	dir := t.TempDir()
	s := newSynth(1)
	s.latch(0, FSetCount, 10, 20, OutOK, 3)
	h := s.build()
	path, err := WriteLinearizationHTML(dir, h, KindLatch, "latch")
	if err != nil {
		t.Fatal(err)
	}
	if path != filepath.Join(dir, "linear-latch-latch.html") {
		t.Errorf("path %s", path)
	}
	if _, err := os.Stat(path); err != nil {
		t.Error(err)
	}
	if _, err := WriteLinearizationHTML(dir, h, KindPlain, "nope"); err == nil {
		t.Error("no error for a partition that does not exist")
	}
}
