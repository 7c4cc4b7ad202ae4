package robustness

import (
	"cmp"
	"slices"
	"strings"
	"testing"
	"time"
)

// synth builds a History for the checkers' tests directly, with times in
// ms from 0 (the history's Begin).
type synth struct {
	h    *History
	ids  map[int]int64
	fids int64
}

// tms is t ms as monotonic ns.
func tms(t float64) int64 { return int64(t * float64(time.Millisecond)) }

// synLimits are the harness's limits, with a short watchdog.
func synLimits() Limits {
	return Limits{
		Watchdog:   2 * time.Second,
		Permits:    map[string]int{"sem": 2},
		PauseSlack: 150 * time.Millisecond,
		Liveness:   4 * time.Second,
	}
}

// newSynth makes a history with processes 0..procs-1 that run from 0 and
// exit cleanly at 100 s.
func newSynth(procs int) *synth {
	s := &synth{h: &History{Seed: 7}, ids: map[int]int64{}}
	for p := range procs {
		s.h.Processes = append(s.h.Processes, Process{Proc: p, Start: 0, Exit: tms(100_000)})
	}
	return s
}

// op adds an op that returned with out.
func (s *synth) op(proc int, kind, f, key string, inv, ret float64, out string, n int64) *Op {
	s.ids[proc]++
	o := &Op{Proc: proc, ID: s.ids[proc], Kind: kind, F: f, Key: key, N: n, Invoke: tms(inv), Return: tms(ret),
		Outcome: out, Done: Never, ReleaseInvoke: Never, ReleaseReturn: Never}
	if ret < 0 {
		o.Return, o.Outcome = Never, OutUnknown
	}
	if kind == KindMulti || kind == KindMultiAtomic {
		o.Keys = []string{"re:0", "re:1"}
	}
	s.h.Ops = append(s.h.Ops, o)
	return o
}

// hold adds an acquisition that held key from ret and released it at
// release (a watchdog hold).
func (s *synth) hold(proc int, kind, key string, inv, ret, release float64) *Op {
	o := s.op(proc, kind, FAcquire, key, inv, ret, OutOK, 1)
	if release >= 0 {
		o.ReleaseInvoke, o.ReleaseReturn = tms(release), tms(release+1)
	}
	return o
}

// synWrite adds a guarded write to hold o.
func (o *Op) synWrite(inv, ret float64, read int64, out string) *Op {
	o.Writes = append(o.Writes, Write{Invoke: tms(inv), Return: tms(ret), Read: read, Outcome: out})
	return o
}

// synDone records that o's ctx was done at t with cause.
func (o *Op) synDone(t float64, cause string) *Op {
	o.Done, o.Cause = tms(t), cause
	return o
}

func (s *synth) fault(typ, target string, start, end float64) {
	s.fids++
	s.h.Faults = append(s.h.Faults, Fault{ID: s.fids, Type: typ, Target: target, Start: tms(start), End: tms(end)})
}

// build finishes the history: ops in order, Finish and Healed set.
func (s *synth) build() *History {
	h := s.h
	slices.SortFunc(h.Ops, func(a, b *Op) int {
		return cmp.Or(cmp.Compare(a.Invoke, b.Invoke), cmp.Compare(a.Proc, b.Proc), cmp.Compare(a.ID, b.ID))
	})
	slices.SortFunc(h.Faults, func(a, b Fault) int { return cmp.Compare(a.Start, b.Start) })
	for _, o := range h.Ops {
		h.Finish = max(h.Finish, opLast(h, o))
	}
	for _, f := range h.Faults {
		if f.End != Never {
			h.Healed = max(h.Healed, f.End)
		}
		h.Finish = max(h.Finish, min(f.End, tms(1e9)))
	}
	for _, p := range h.Processes {
		if p.Exit != Never {
			h.Finish = max(h.Finish, p.Exit)
		}
	}
	return h
}

// synPass fails the test if r has a violation or checked nothing.
func synPass(t *testing.T, r Result) {
	t.Helper()
	for _, v := range r.Violations {
		t.Errorf("%s: unexpected violation: %s", r.Check, v.Msg)
	}
	if r.Checked == 0 {
		t.Errorf("%s: checked nothing", r.Check)
	}
}

// synViolations fails the test unless r has exactly n violations, each
// naming every one of words.
func synViolations(t *testing.T, r Result, n int, words ...string) {
	t.Helper()
	if len(r.Violations) != n {
		t.Fatalf("%s: %d violations, want %d: %v", r.Check, len(r.Violations), n, r.Violations)
	}
	for _, v := range r.Violations {
		if v.Check != r.Check {
			t.Errorf("violation of %q in the result of %q", v.Check, r.Check)
		}
		for _, w := range words {
			if !strings.Contains(v.Msg, w) {
				t.Errorf("%s: violation %q does not say %q", r.Check, v.Msg, w)
			}
		}
	}
}

// synNote fails the test unless one of r's notes says all of words.
func synNote(t *testing.T, r Result, words ...string) {
	t.Helper()
	for _, n := range r.Notes {
		all := true
		for _, w := range words {
			all = all && strings.Contains(n, w)
		}
		if all {
			return
		}
	}
	t.Errorf("%s: no note says %q: %q", r.Check, words, r.Notes)
}
