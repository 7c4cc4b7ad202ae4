package robustness

// The liveness checker.
//
// Model (design.md §7, "bounded calls" and "waiters woken after the
// faults heal"):
//
//   - (a) every call returns: an op, a release or a guarded write that
//     never returned is stuck, unless its process was killed or exited
//     with an error (which (c) reports);
//   - (b) the final sweep, made by every process after the workload
//     stopped, the faults healed and every hold was released, takes every
//     lock within lim.Liveness: each sweep op must be ok;
//   - (c) every process that was not killed exits cleanly (its Clients'
//     Close returned);
//   - (d) a waiter with wait time left gets a free lock: an acquire that
//     failed with "not acquired" while, after the faults healed and
//     lim.Liveness more passed, the key stayed free for lim.Liveness
//     within its wait, is a violation. "Free" is judged conservatively:
//     a hold counts from its acquire's invoke until its release returned
//     ok, or else until a lease bound (max(Watchdog, its lease) +
//     PauseSlack) after its owner stopped renewing (release invoked,
//     process gone); an acquire of unknown outcome counts as a hold until
//     that bound after it returned; a read waiter is blocked by any hold
//     (writers first), a semaphore waiter when too few permits are free.
//
// The overshoot of acquisitions past their wait time is reported in the
// notes, with and without faults, not judged.

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// CheckLiveness checks that calls return, the final sweep succeeds,
// processes exit cleanly and free locks are taken. Checked counts ops and
// processes.
func CheckLiveness(h *History, lim Limits) Result {
	f := newFacts(h, lim)
	lv := &liveness{facts: f, c: newCollector(CheckNameLiveness), procs: map[int]Process{}}
	for _, p := range h.Processes {
		lv.procs[p.Proc] = p
	}
	lv.stuck()
	lv.sweeps()
	lv.processes()
	lv.overshoot()
	lv.freeLocks()
	return lv.c.result()
}

type liveness struct {
	*facts
	c     *collector
	procs map[int]Process
}

// excused says why a call of process proc that never returned is not
// stuck ("": it is).
func (lv *liveness) excused(proc int) string {
	if _, ok := lv.killed[proc]; ok {
		return "killed"
	}
	if p, ok := lv.procs[proc]; ok && p.Err != "" {
		return "exited with an error"
	}
	return ""
}

// stuck checks (a).
func (lv *liveness) stuck() {
	excused := map[string]int{}
	check := func(o *Op, what string, invoke int64) {
		if why := lv.excused(o.Proc); why != "" {
			excused[why]++
			return
		}
		exit := "never exited"
		if p, ok := lv.procs[o.Proc]; ok && p.Exit != Never {
			exit = "exited at " + lv.ms(p.Exit)
		}
		lv.c.add(Violation{
			Msg:  fmt.Sprintf("stuck: %s of %s invoked at %s never returned (its process %s)", what, opName(o), lv.ms(invoke), exit),
			From: invoke, To: lv.h.Finish, Ops: []*Op{o},
		})
	}
	for _, o := range lv.h.Ops {
		lv.c.res.Checked++
		if o.Return == Never {
			check(o, "the call", o.Invoke)
			continue
		}
		if o.ReleaseInvoke != Never && o.ReleaseReturn == Never {
			check(o, "the release", o.ReleaseInvoke)
		}
		for _, w := range o.Writes {
			if w.Return == Never {
				check(o, "a guarded write", w.Invoke)
			}
		}
	}
	for _, why := range sortedKeys(excused) {
		lv.c.note("%d calls never returned in processes that were %s", excused[why], why)
	}
}

// sweeps checks (b).
func (lv *liveness) sweeps() {
	n := 0
	for _, o := range lv.h.Ops {
		if o.F != FSweep {
			continue
		}
		n++
		if o.Outcome == OutOK {
			continue
		}
		what := fmt.Sprintf("failed at %s: %s", lv.ms(o.Return), o.Err)
		if o.Return == Never {
			what = "never returned"
		}
		lv.c.add(Violation{
			Msg:  fmt.Sprintf("final sweep of %s %s (wait %v) %s", o.Kind, strings.Join(opKeys(o), ","), time.Duration(o.Wait), what),
			From: o.Invoke, To: min(o.Return, lv.h.Finish), Ops: []*Op{o},
		})
	}
	if n == 0 {
		lv.c.note("no final sweep in the history")
	} else {
		lv.c.note("%d sweep acquisitions", n)
	}
}

// processes checks (c).
func (lv *liveness) processes() {
	killed := 0
	for _, p := range lv.h.Processes {
		lv.c.res.Checked++
		if _, ok := lv.killed[p.Proc]; ok {
			killed++
			continue
		}
		switch {
		case p.Exit == Never:
			lv.c.add(Violation{Msg: fmt.Sprintf("process p%d (started %s) never exited", p.Proc, lv.ms(p.Start)), From: p.Start, To: lv.h.Finish})
		case p.Err != "":
			lv.c.add(Violation{Msg: fmt.Sprintf("process p%d exited at %s with an error: %s", p.Proc, lv.ms(p.Exit), p.Err), From: p.Start, To: p.Exit})
		}
	}
	if killed > 0 {
		lv.c.note("%d processes killed by the nemesis", killed)
	}
}

// waits reports whether o is a call bounded by a wait time.
func waits(o *Op) bool {
	return (o.F == FAcquire || o.F == FSweep || o.F == FAwait) && !o.Nested && o.Wait >= 0 && o.Return != Never
}

// overshoot notes the largest overshoot of bounded calls past their wait
// time, for calls that overlapped a fault and calls that did not.
func (lv *liveness) overshoot() {
	var worst [2]*Op // [0] without faults, [1] under faults
	over := func(o *Op) int64 { return o.Return - o.Invoke - o.Wait }
	for _, o := range lv.h.Ops {
		if !waits(o) {
			continue
		}
		i := 0
		for _, fl := range lv.h.Faults {
			if fl.Start <= o.Return && fl.End >= o.Invoke {
				i = 1
				break
			}
		}
		if worst[i] == nil || over(o) > over(worst[i]) {
			worst[i] = o
		}
	}
	for i, label := range []string{"without faults", "under faults"} {
		if o := worst[i]; o != nil {
			lv.c.note("largest overshoot past the wait time %s: %s (%s, wait %v, returned %s at %s)",
				label, dur(over(o)), opName(o), time.Duration(o.Wait), o.Outcome, lv.ms(o.Return))
		}
	}
}

// blocker is a time a key may have been taken in Redis, and by how many
// permits.
type blocker struct {
	op         *Op
	start, end int64
	n          int64
}

// holdBound is how long after its owner stopped renewing a hold may stay
// in Redis.
func (lv *liveness) holdBound(o *Op) time.Duration {
	return max(lv.lim.Watchdog, time.Duration(o.Lease)) + lv.lim.PauseSlack
}

// blockers lists, per key, the times the key may have been taken.
func (lv *liveness) blockers() map[string][]blocker {
	out := map[string][]blocker{}
	for _, o := range lv.h.Ops {
		if o.Nested || (o.F != FAcquire && o.F != FSweep) || (!exclusiveKind(o.Kind) && o.Kind != KindSemaphore) {
			continue
		}
		var end int64
		switch {
		case o.Holds() && o.ReleaseReturn != Never && o.ReleaseErr == "":
			end = o.ReleaseReturn
		case o.Holds():
			end = plus(min(o.ReleaseInvoke, lv.stopOf(o.Proc)), lv.holdBound(o))
		case o.Outcome == OutUnknown:
			// It may have taken the lock: an unconfirmed acquisition is
			// never renewed, so it goes with its lease.
			end = plus(min(o.Return, lv.stopOf(o.Proc)), lv.holdBound(o))
		default:
			continue
		}
		b := blocker{op: o, start: o.Invoke, end: end, n: 1}
		if o.Kind == KindSemaphore {
			b.n = permitsOf(o)
		}
		for _, k := range opKeys(o) {
			out[k] = append(out[k], b)
		}
	}
	return out
}

// freeLocks checks (d).
func (lv *liveness) freeLocks() {
	if lv.lim.Liveness <= 0 {
		lv.c.note("Limits.Liveness not set: waiters not checked against free locks")
		return
	}
	from := plus(lv.h.Healed, lv.lim.Liveness)
	var blocks map[string][]blocker
	checked := 0
	for _, o := range lv.h.Ops {
		if o.F != FAcquire || o.Nested || o.Outcome != OutFail || !strings.Contains(o.Err, "not acquired") ||
			o.Return == Never || (!exclusiveKind(o.Kind) && o.Kind != KindSemaphore) {
			continue
		}
		start := max(o.Invoke, from)
		if o.Return-start < int64(lv.lim.Liveness) {
			continue
		}
		capacity := int64(0)
		if o.Kind == KindSemaphore {
			permits, ok := lv.lim.Permits[o.Key]
			if !ok {
				continue
			}
			capacity = int64(permits) - permitsOf(o)
		}
		if blocks == nil {
			blocks = lv.blockers()
		}
		checked++
		var busy []blocker
		for _, k := range opKeys(o) {
			for _, b := range blocks[k] {
				if b.op != o && b.start < o.Return && b.end > start {
					busy = append(busy, b)
				}
			}
		}
		gs, ge := longestFree(start, o.Return, busy, capacity)
		if ge-gs < int64(lv.lim.Liveness) {
			continue
		}
		lv.c.add(Violation{
			Msg: fmt.Sprintf("a waiter with wait time left did not get a free lock: %s (wait %v, invoked %s) failed at %s (%s), though the key was free from %s to %s (%s), %v after the faults healed at %s",
				opName(o), time.Duration(o.Wait), lv.ms(o.Invoke), lv.ms(o.Return), o.Err, lv.ms(gs), lv.ms(ge), dur(ge-gs), lv.lim.Liveness, lv.ms(lv.h.Healed)),
			From: gs, To: ge, Ops: []*Op{o},
		})
	}
	lv.c.note("%d failed waiters checked against free locks (after %s)", checked, lv.ms(from))
}

// longestFree returns the longest stretch of [from, to] during which the
// blockers took no more than capacity (permits left for the waiter; 0 for
// a lock).
func longestFree(from, to int64, busy []blocker, capacity int64) (int64, int64) {
	type step struct {
		t int64
		n int64
	}
	steps := make([]step, 0, 2*len(busy))
	for _, b := range busy {
		steps = append(steps, step{max(b.start, from), b.n}, step{min(b.end, to), -b.n})
	}
	// At one instant, takes before gives: touching holds leave no gap.
	slices.SortFunc(steps, func(a, b step) int { return cmp.Or(cmp.Compare(a.t, b.t), -cmp.Compare(a.n, b.n)) })
	bestFrom, bestTo := from, from
	used, freeSince := int64(0), from
	for _, s := range steps {
		if used <= capacity && s.t-freeSince > bestTo-bestFrom {
			bestFrom, bestTo = freeSince, s.t
		}
		used += s.n
		if used <= capacity && used-s.n > capacity {
			freeSince = s.t
		}
	}
	if used <= capacity && to-freeSince > bestTo-bestFrom {
		bestFrom, bestTo = freeSince, to
	}
	return bestFrom, bestTo
}
