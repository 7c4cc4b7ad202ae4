package robustness

// The exclusion checker.
//
// Model: a hold is an acquisition that returned ok (not a re-entry of the
// same owner inside its own hold, which is the outer hold's). It lasts
// from the acquire's return (before it, the owner cannot count on the
// lock) to its end: its ctx done, its release invoked, or its process
// gone (exit or SIGKILL), whichever came first (Op.End). The promise
// (design.md §7): a hold's ctx is done before any other owner can be
// granted the lock, so
//
//   - two holds of an exclusive kind (reentrant, fair, write, red, fenced,
//     multi, multi-atomic) on one key never overlap; a multi-lock holds
//     every member key (they are reentrant lock keys), so it excludes the
//     reentrant holds of its members and other multis sharing one;
//   - read holds of a key may overlap each other, never a write hold of it;
//   - the holds of a leased semaphore never take more permits at once than
//     it has.
//
// Documented limits, bounded rather than forgiven:
//
//   - A paused holder: a process frozen by SIGSTOP cannot act, and after
//     SIGCONT its timer fires late. When a hold's recorded end falls within
//     a pause of its process (up to PauseSlack after SIGCONT), its
//     effective end is the pause's start.
//   - Data loss: FLUSHALL makes Redis forget the locks. An overlap of an
//     earlier hold A and a later acquisition B is exempt when a flush ended
//     after A's acquire was invoked (it may have run after A's script) and
//     began before B's returned, and A ended
//     within its lease bound (Watchdog+PauseSlack for a watchdog hold, its
//     lease for a fixed one) after the flush ended. A that outlives the
//     bound is a violation.

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// CheckExclusion checks that holds exclude each other as their kinds
// promise. Checked counts holds (a multi-lock hold once per member key).
func CheckExclusion(h *History, lim Limits) Result {
	f := newFacts(h, lim)
	x := &exclusion{facts: f, c: newCollector(CheckNameExclusion)}
	locks := map[string][]span{}
	sems := map[string][]span{}
	for _, o := range h.Ops {
		if !o.Holds() || o.Nested {
			continue
		}
		switch {
		case o.Kind == KindSemaphore:
			sems[o.Key] = append(sems[o.Key], f.span(o))
		case exclusiveKind(o.Kind):
			s := f.span(o)
			for _, k := range opKeys(o) {
				locks[k] = append(locks[k], s)
			}
		}
	}
	born := map[*Op]bool{}
	for _, spans := range [2]map[string][]span{locks, sems} {
		for _, ss := range spans {
			for _, s := range ss {
				if s.doa {
					born[s.op] = true
				}
			}
		}
	}
	for _, k := range sortedKeys(locks) {
		x.locks(k, locks[k])
	}
	for _, k := range sortedKeys(sems) {
		x.semaphore(k, sems[k])
	}
	c := x.c
	c.note("compared %d pairs of overlapping recorded holds", x.pairs)
	if x.paused > 0 {
		c.note("%d overlaps exempt: a holder was paused (its end moved to the pause's start, recorded end within PauseSlack %v of SIGCONT)", x.paused, lim.PauseSlack)
	}
	if len(born) > 0 {
		c.note("%d holds dead on arrival: returned ok with the lock lost within %v (the reply came after the deadline), %d overlaps exempt for it", len(born), deadOnArrival, x.doa)
	}
	if x.lost > 0 {
		c.note("%d overlaps exempt: a flush (data loss) came between the acquisitions and the earlier holder learnt within its lease bound", x.lost)
	}
	return c.result()
}

type exclusion struct {
	*facts
	c      *collector
	pairs  int // pairs of holds whose recorded intervals overlap
	paused int // of those, exempt because a holder was paused
	doa    int // exempt because a hold was dead on arrival
	lost   int // exempt because of data loss
}

// sortedKeys returns m's keys in order, so that reports are deterministic.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// byStart orders spans by the start of their hold.
func byStart(a, b span) int {
	return cmp.Or(cmp.Compare(a.start, b.start), cmp.Compare(a.op.Proc, b.op.Proc), cmp.Compare(a.op.ID, b.op.ID))
}

// locks sweeps the holds of one key in order of their start, keeping the
// holds whose recorded end is still ahead: each new hold is compared with
// those only, so the cost is the number of overlapping pairs, not n².
func (x *exclusion) locks(key string, spans []span) {
	slices.SortFunc(spans, byStart)
	var active []span
	for _, b := range spans {
		x.c.res.Checked++
		active = slices.DeleteFunc(active, func(a span) bool { return a.rec <= b.start })
		for _, a := range active {
			if a.op == b.op || (a.op.Kind == KindRead && b.op.Kind == KindRead) {
				continue
			}
			x.pairs++
			x.judge(key, a, b)
		}
		active = append(active, b)
	}
}

// judge decides on holds a and b (a started first) whose recorded
// intervals overlap.
func (x *exclusion) judge(key string, a, b span) {
	overlap := min(a.end, b.end) - b.start
	if overlap <= 0 {
		x.shortened(a, b)
		return
	}
	fl, inTime := x.lossEither(a, b)
	if fl != nil && inTime {
		x.lost++
		return
	}
	msg := fmt.Sprintf("key %s: %s and %s overlap for %s", key, x.holdName(a), x.holdName(b), dur(overlap))
	if fl != nil {
		msg += x.lateLearner(a, fl)
	}
	msg += x.latePause(a) + x.latePause(b)
	x.c.add(Violation{Msg: msg, From: b.start, To: min(a.end, b.end), Ops: []*Op{a.op, b.op}})
}

// shortened counts an overlap of recorded holds that the effective ends
// took away, by why.
func (x *exclusion) shortened(spans ...span) {
	for _, s := range spans {
		if s.doa {
			x.doa++
			return
		}
	}
	x.paused++
}

// latePause says when a hold's process was paused during the hold, but
// the hold ended too long after SIGCONT for the pause to excuse it.
func (x *exclusion) latePause(s span) string {
	if s.paused != nil || s.doa {
		return ""
	}
	for _, p := range x.pauses[s.op.Proc] {
		if p.Start <= s.rec && p.End >= s.start && p.End != Never {
			return fmt.Sprintf(" (p%d was paused %s..%s, but its hold ended %s after SIGCONT, past PauseSlack %v)",
				s.op.Proc, x.ms(p.Start), x.ms(p.End), dur(s.rec-p.End), x.lim.PauseSlack)
		}
	}
	return ""
}

// lateLearner explains why a flush does not excuse holder a.
func (x *exclusion) lateLearner(a span, fl *Fault) string {
	return fmt.Sprintf(" (a %s at %s..%s lets the later one in, but the holder did not learn of the flush within its renewal: its hold ended %s after the flush healed, bound %v)",
		fl.Type, x.ms(fl.Start), x.ms(fl.End), dur(a.end-fl.End), x.leaseBound(a.op))
}

// semaphore sweeps the holds of one leased semaphore: the permits in use
// only grow when a hold starts, so checking the sum at every start finds
// every excess.
func (x *exclusion) semaphore(key string, spans []span) {
	permits, ok := x.lim.Permits[key]
	if !ok {
		x.c.note("semaphore %s: permits unknown (Limits.Permits), %d holds not checked", key, len(spans))
		return
	}
	slices.SortFunc(spans, byStart)
	var active []span
	for _, b := range spans {
		x.c.res.Checked++
		active = slices.DeleteFunc(active, func(a span) bool { return a.rec <= b.start })
		active = append(active, b)
		var live []span
		used, recorded := int64(0), int64(0)
		for _, a := range active {
			recorded += permitsOf(a.op)
			if a.end > b.start {
				live = append(live, a)
				used += permitsOf(a.op)
			}
		}
		x.pairs += len(active) - 1
		if used <= int64(permits) {
			if recorded > int64(permits) {
				x.shortened(active...)
			}
			continue
		}
		// Holds acquired before a flush that came before b, and that
		// ended within their bound after it, are forgotten by Redis: b
		// may take their permits. Or b is the one forgotten: its script
		// ran before the flush, its reply came after it and after a's
		// acquisition (seed 30068944: a reply delayed by latency), so
		// its permits and a's were never held at once (lossEither, as
		// for the locks).
		kept := int64(0)
		var late []string
		for _, a := range live {
			if a.op != b.op {
				fl, inTime := x.lossEither(a, b)
				if fl != nil && inTime {
					continue
				}
				if fl != nil {
					late = append(late, x.lateLearner(a, fl))
				}
			}
			kept += permitsOf(a.op)
		}
		if kept <= int64(permits) {
			x.lost++
			continue
		}
		var names []string
		var ops []*Op
		to := Never
		for _, a := range live {
			names = append(names, fmt.Sprintf("%s (%d)", x.holdName(a), permitsOf(a.op)))
			ops = append(ops, a.op)
			to = min(to, a.end)
		}
		msg := fmt.Sprintf("semaphore %s: %d permits held at %s, it has %d: %s", key, used, x.ms(b.start), permits, strings.Join(names, "; "))
		msg += strings.Join(late, "")
		x.c.add(Violation{Msg: msg, From: b.start, To: to, Ops: ops})
	}
}

// permitsOf is the number of permits a semaphore hold took.
func permitsOf(o *Op) int64 { return max(o.N, 1) }
