package robustness

import (
	"fmt"
	"strings"
	"time"
)

// Limits are what the checkers need to know of the run.
type Limits struct {
	Watchdog   time.Duration  // WatchdogTimeout of every Client (a watchdog hold is renewed every Watchdog/3)
	Permits    map[string]int // leased-semaphore key -> its permits
	PauseSlack time.Duration  // see "paused holder" in check_exclusion.go; the harness uses 150ms
	Liveness   time.Duration  // bound for the final sweep's acquisitions (see check_liveness.go)
	// DataKeys reports whether a key on the lock server is data the user
	// owns (a semaphore's free count, a latch's counter): CheckHygiene
	// allows those without a TTL. Nil: only the keys of Permits are data.
	DataKeys func(key string) bool
}

// Violation is one broken promise, with what it takes to look at it.
type Violation struct {
	Check    string // the checker's name
	Msg      string // what is wrong, naming the ops (proc/op id, kind, key, times relative to History.Begin in ms)
	From, To int64  // the window of the history that shows it (monotonic ns)
	Ops      []*Op  // the ops involved
	// Files are artifacts written for it (porcupine's visualization);
	// WriteArtifacts copies them into its directory.
	Files []string
}

// Result is what one checker found.
type Result struct {
	Check      string
	Checked    int // how many things it checked (pairs, holds, writes, ops ...): > 0 for a meaningful run
	Violations []Violation
	Notes      []string // what it exempted and why (counts), unknown porcupine results, etc.
}

// OK reports whether the check found nothing wrong.
func (r Result) OK() bool { return len(r.Violations) == 0 }

// The checkers' names (Result.Check, Violation.Check).
const (
	CheckNameExclusion = "exclusion"
	CheckNameWrites    = "writes"
	CheckNameFencing   = "fencing"
	CheckNameLinear    = "linearizability"
	CheckNameLiveness  = "liveness"
	CheckNameHygiene   = "hygiene"
)

// CheckAll runs every checker that needs only the history (CheckHygiene
// needs the lock server, and runs apart). Porcupine's visualizations of
// non-linearizable partitions go to artifactsDir ("": none written).
func CheckAll(h *History, lim Limits, artifactsDir string) []Result {
	return []Result{
		CheckExclusion(h, lim),
		CheckWrites(h, lim),
		CheckFencing(h, lim),
		CheckLinearizable(h, lim, artifactsDir),
		CheckLiveness(h, lim),
	}
}

// facts are what every checker derives from a history before judging it:
// when each process stopped acting (exit or kill), the pauses of each,
// and the faults that lose data. They are computed once per check, so a
// check over 100k ops looks nothing up in a loop over faults or
// processes.
type facts struct {
	h      *History
	lim    Limits
	stop   map[int]int64   // proc -> when it stopped: exit, or the kill that ended it
	killed map[int]int64   // proc -> the start of the kill fault that ended it
	pauses map[int][]Fault // proc -> the pause-process faults on it
	losses []Fault         // the faults that make Redis forget (LosesData)
}

func newFacts(h *History, lim Limits) *facts {
	f := &facts{h: h, lim: lim, stop: map[int]int64{}, killed: map[int]int64{}, pauses: map[int][]Fault{}}
	for _, fl := range h.Faults {
		if LosesData(fl.Type) {
			f.losses = append(f.losses, fl)
		}
	}
	for _, p := range h.Processes {
		stop := p.Exit
		for _, fl := range h.Faults {
			// A process's index is never reused (a restart is a new
			// one), so a fault on "p3" after p3 started is on it even if
			// the harness stamped its exit a hair before the kill.
			if !procTargeted(fl, p.Proc) || fl.Start < p.Start || (fl.Target == "all" && fl.Start > p.Exit) {
				continue
			}
			switch fl.Type {
			case FaultKillProcess:
				if _, seen := f.killed[p.Proc]; !seen {
					f.killed[p.Proc] = fl.Start
					stop = min(stop, fl.Start)
				}
			case FaultPauseProcess, FaultStall:
				f.pauses[p.Proc] = append(f.pauses[p.Proc], fl)
			}
		}
		f.stop[p.Proc] = stop
	}
	return f
}

// procTargeted reports whether fault fl targets worker process proc.
func procTargeted(fl Fault, proc int) bool {
	return fl.Target == ProcTarget(proc) || fl.Target == "all"
}

// stopOf is when process proc stopped acting (Never if it did not, or is
// unknown to the history).
func (f *facts) stopOf(proc int) int64 {
	if t, ok := f.stop[proc]; ok {
		return t
	}
	return Never
}

// plus adds d to t, saturating at Never.
func plus(t int64, d time.Duration) int64 {
	if t == Never || int64(d) > Never-t {
		return Never
	}
	return t + int64(d)
}

// span is a hold's interval as the checkers judge it: from the acquire's
// return (the owner cannot count on the lock before) to its end, moved
// back to the start of a pause of its process when the recorded end fell
// within that pause (plus PauseSlack): a process frozen by SIGSTOP cannot
// act, and after SIGCONT its timer fires late (a documented limit; fencing
// tokens are the remedy).
type span struct {
	op     *Op
	start  int64  // o.Return
	end    int64  // the effective end
	rec    int64  // the recorded end: ctx done, release invoked, or process gone (>= end)
	paused *Fault // the pause that moved the end, if one did
	doa    bool   // dead on arrival: its ctx was done when the acquire returned
}

// deadOnArrival bounds how long after an acquire's return its hold's
// "done" event may be recorded for the hold to count as never had. An
// acquisition whose reply comes back after its deadline (send time + lease
// - drift) returns ok with a ctx that is done already, with the lock lost
// as its cause, and the worker records that only after its return, by a
// goroutine. Such a hold is no hold: the owner was told at once. The
// bound loses nothing: a hold alive at its return and lost within 5ms
// still keeps the key in Redis for drift (at least 5ms, runtime/internal/leaseclock)
// after that, so no other owner can return with the lock before the
// recorded end anyway. A hold that ended early for another cause (the
// caller's ctx, a Close) was alive, as was one that made a guarded write
// before its end: those workers write only while the ctx is not done.
const deadOnArrival = 5 * time.Millisecond

// bornDead reports whether hold o's ctx was done when its acquire
// returned (see deadOnArrival).
func bornDead(o *Op) bool {
	if o.Done == Never || o.Done > plus(o.Return, deadOnArrival) || !strings.Contains(o.Cause, "lock lost") {
		return false
	}
	if o.Kind != KindFenced { // a fenced worker writes without looking at its ctx
		for _, w := range o.Writes {
			if w.Invoke < o.Done {
				return false
			}
		}
	}
	return true
}

func (f *facts) span(o *Op) span {
	rec := o.End(f.stopOf(o.Proc))
	s := span{op: o, start: o.Return, end: rec, rec: rec}
	if bornDead(o) {
		s.end, s.doa = s.start, true
		return s
	}
	for i, p := range f.pauses[o.Proc] {
		if o.Return <= p.End && rec >= p.Start && rec <= plus(p.End, f.lim.PauseSlack) {
			s.end = max(p.Start, o.Return)
			s.paused = &f.pauses[o.Proc][i]
			break
		}
	}
	return s
}

// leaseBound is how long after a flush a holder may go on counting on a
// hold Redis forgot: a watchdog hold learns at its next renewal, at the
// latest when its lease (Watchdog) runs out since the last confirmed
// renewal, plus the timer's slack; a fixed-lease hold when its lease ends.
func (f *facts) leaseBound(o *Op) time.Duration {
	if o.Lease == 0 {
		return f.lim.Watchdog + f.lim.PauseSlack
	}
	return time.Duration(o.Lease)
}

// redKind reports whether kind lives on the RedLock servers rather than
// the lock server.
func redKind(kind string) bool { return kind == KindRed }

// lossAffects reports whether a data-losing fault fl hit the server where
// locks of kind live: "red*" targets hit RedLock nodes, anything else
// ("lock", "all") the lock server.
func lossAffects(fl Fault, kind string) bool {
	if fl.Target == "all" {
		return true
	}
	return strings.HasPrefix(fl.Target, "red") == redKind(kind)
}

// lossVerdict says whether an overlap of hold a (acquired first) and b is
// explained by data loss: a fault that made Redis forget ended after a's
// acquire was invoked (its script may have run before the fault, its
// reply come after; and a FLUSHALL sent before the invoke may run after
// a's script, until it is answered) and started before b's returned, and
// a ended within its lease bound after that fault. It returns the fault
// (nil: none between them) and whether a learnt in time.
func (f *facts) lossVerdict(a, b span) (*Fault, bool) {
	var found *Fault
	for i, fl := range f.losses {
		if !lossAffects(fl, a.op.Kind) || fl.End <= a.op.Invoke || fl.Start >= b.start {
			continue
		}
		if a.end <= plus(fl.End, f.leaseBound(a.op)) {
			return &f.losses[i], true
		}
		if found == nil {
			found = &f.losses[i]
		}
	}
	return found, false
}

// lossEither is lossVerdict for a pair of holds in either role: the one
// Redis forgot may also be the one whose acquire returned later (its
// script ran before the flush, its reply came after it, and after the
// other's acquisition: seed 213947801).
func (f *facts) lossEither(a, b span) (*Fault, bool) {
	fl, inTime := f.lossVerdict(a, b)
	if fl != nil && inTime {
		return fl, true
	}
	if fl2, inTime2 := f.lossVerdict(b, a); fl2 != nil && inTime2 {
		return fl2, true
	}
	return fl, false
}

// ms renders t relative to the history's start, in ms.
func (f *facts) ms(t int64) string { return relMS(f.h, t) }

func relMS(h *History, t int64) string {
	if t == Never {
		return "never"
	}
	return fmt.Sprintf("%.1fms", float64(t-h.Begin)/1e6)
}

// dur renders a length in ms.
func dur(d int64) string {
	if d == Never {
		return "unbounded"
	}
	return fmt.Sprintf("%.1fms", float64(d)/1e6)
}

// opName names an op: process, id, kind, function and key(s).
func opName(o *Op) string {
	key := o.Key
	if len(o.Keys) > 0 {
		key = "[" + strings.Join(o.Keys, ",") + "]"
	}
	s := fmt.Sprintf("p%d/op%d %s %s %s", o.Proc, o.ID, o.Kind, o.F, key)
	if o.Nested {
		s += " (nested)"
	}
	return s
}

// holdName names a hold and its interval.
func (f *facts) holdName(s span) string {
	out := fmt.Sprintf("%s held %s..%s", opName(s.op), f.ms(s.start), f.ms(s.end))
	switch {
	case s.doa:
		out += " (dead on arrival)"
	case s.paused != nil:
		out += fmt.Sprintf(" (recorded end %s, paused at %s)", f.ms(s.rec), f.ms(s.end))
	}
	return out
}

// opKeys are the keys an op touches: a multi-lock's members, or its key.
func opKeys(o *Op) []string {
	if len(o.Keys) > 0 && (o.Kind == KindMulti || o.Kind == KindMultiAtomic) {
		return o.Keys
	}
	return []string{o.Key}
}

// exclusiveKind reports whether holds of kind exclude each other (reads
// exclude only writes).
func exclusiveKind(kind string) bool {
	switch kind {
	case KindReentrant, KindFair, KindRead, KindWrite, KindRed, KindFenced, KindMulti, KindMultiAtomic:
		return true
	}
	return false
}

// maxViolations caps the violations one check lists: past the first few
// hundred, one bug repeats itself (a hold that never ends overlaps every
// later one), and the count is enough.
const maxViolations = 200

// collector builds a Result.
type collector struct {
	res     Result
	dropped int
}

func newCollector(check string) *collector { return &collector{res: Result{Check: check}} }

func (c *collector) add(v Violation) {
	if len(c.res.Violations) >= maxViolations {
		c.dropped++
		return
	}
	v.Check = c.res.Check
	c.res.Violations = append(c.res.Violations, v)
}

func (c *collector) note(format string, args ...any) {
	c.res.Notes = append(c.res.Notes, fmt.Sprintf(format, args...))
}

func (c *collector) result() Result {
	if c.dropped > 0 {
		c.note("%d more violations not listed (the first %d are)", c.dropped, maxViolations)
	}
	return c.res
}
