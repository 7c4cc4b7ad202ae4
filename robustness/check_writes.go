package robustness

// The lost-update checker.
//
// Model: under an exclusive hold (every exclusive kind but fenced, whose
// writes go to the fenced register, and read, which does not write), the
// worker does read-modify-writes of a counter in a storage server that is
// never faulted: it reads v and writes v+1. The counter of a hold is its
// key's (a multi-lock's: its first member's). If exclusion holds, the ok
// writes of one counter form a chain: no two read the same value (two
// overlapping holders would both read v and both write v+1, and one
// update would be lost). And every ok write starts inside its hold:
// [acquire's return, effective end] as check_exclusion.go computes it.
//
// Documented limits, as in check_exclusion.go: a paused holder's write
// after SIGCONT (before its late timer fired), or in flight when SIGSTOP
// froze it, lands outside its effective hold, and may duplicate another's
// read; it also sets the counter back to the stale value it read plus
// one, so the holders after it read values that holders before it read
// already (seed 295086183: a write frozen for 2.8 s between its read of
// 408 and its write of 409 rewound the counter from 420). A holder whose
// lock was forgotten by a flush may write until it learns, within its
// lease bound. A write in flight when its hold ended (begun inside the
// hold, returned after its end: the storage or the process was slow
// between the read and the write) may read what the next holder reads,
// and may set the counter back as a paused one does (seed 38873113: a
// write begun 5.6 ms before its fixed lease ran out took 94 ms on a
// loaded box, and the next owner, granted 11 ms after the end, read the
// same value). No lock service can prevent that either (fencing can);
// that the holds themselves never overlapped is check_exclusion.go's
// judgement, so the duplicate is exempt only where the other hold began
// after this one ended. All are exempt and counted in the notes.

import (
	"cmp"
	"fmt"
	"slices"
)

// CheckWrites checks the guarded writes of exclusive holds for lost
// updates. Checked counts ok writes.
func CheckWrites(h *History, lim Limits) Result {
	f := newFacts(h, lim)
	c := newCollector(CheckNameWrites)
	counters := map[string]map[int64][]counterWrite{}
	rewinds := map[string][]counterWrite{} // paused writes, by counter
	pausedOutside := 0
	for _, o := range h.Ops {
		if !o.Holds() || !exclusiveKind(o.Kind) || o.Kind == KindFenced || o.Kind == KindRead || len(o.Writes) == 0 {
			continue
		}
		s := f.span(o)
		key := counterOf(o)
		for i := range o.Writes {
			w := &o.Writes[i]
			if w.Outcome != OutOK {
				continue
			}
			c.res.Checked++
			gw := counterWrite{s: s, w: w}
			switch {
			case w.Invoke >= s.start && w.Invoke <= s.end:
			case gw.paused():
				pausedOutside++
			default:
				c.add(Violation{
					Msg:  fmt.Sprintf("counter %s: write at %s..%s (read %d) outside its hold: %s", key, f.ms(w.Invoke), f.ms(w.Return), w.Read, f.holdName(s)),
					From: min(s.start, w.Invoke), To: max(s.end, w.Invoke), Ops: []*Op{o},
				})
			}
			if gw.paused() || gw.inFlightAtEnd() {
				rewinds[key] = append(rewinds[key], gw)
			}
			if counters[key] == nil {
				counters[key] = map[int64][]counterWrite{}
			}
			counters[key][w.Read] = append(counters[key][w.Read], gw)
		}
	}
	pausedDup, inFlightDup, rewoundDup, lostDup := 0, 0, 0, 0
	for _, key := range sortedKeys(counters) {
		reads := counters[key]
		values := make([]int64, 0, len(reads))
		for v := range reads {
			values = append(values, v)
		}
		slices.Sort(values)
		for _, v := range values {
			ws := reads[v]
			slices.SortFunc(ws, func(a, b counterWrite) int { return cmp.Compare(a.w.Invoke, b.w.Invoke) })
			for i := range ws {
				for j := i + 1; j < len(ws); j++ {
					a, b := ws[i], ws[j]
					if a.s.op != b.s.op && (a.paused() || b.paused()) {
						pausedDup++
						continue
					}
					if a.s.op != b.s.op && (a.landedAfter(b) || b.landedAfter(a)) {
						inFlightDup++
						continue
					}
					// A paused write that set the counter back explains a
					// read repeated by one hold too: it counted on past
					// the value, then read it again after the rewind.
					if rewound(rewinds[key], a, b, v) {
						rewoundDup++
						continue
					}
					if a.s.op != b.s.op {
						first, second := a.s, b.s
						if byStart(first, second) > 0 {
							first, second = second, first
						}
						if fl, inTime := f.lossEither(first, second); fl != nil && inTime {
							lostDup++
							continue
						}
					}
					c.add(Violation{
						Msg: fmt.Sprintf("counter %s: lost update: the writes at %s and %s both read %d (%s; %s)",
							key, f.ms(a.w.Invoke), f.ms(b.w.Invoke), v, f.holdName(a.s), f.holdName(b.s)),
						From: min(a.w.Invoke, b.w.Invoke), To: max(a.w.Return, b.w.Return), Ops: []*Op{a.s.op, b.s.op},
					})
				}
			}
		}
	}
	if pausedOutside > 0 {
		c.note("%d writes exempt: made after SIGCONT by a paused holder, past its effective end", pausedOutside)
	}
	if pausedDup > 0 {
		c.note("%d duplicate reads exempt: one writer was a paused holder writing after SIGCONT", pausedDup)
	}
	if inFlightDup > 0 {
		c.note("%d duplicate reads exempt: one write was in flight when its hold ended, and the other hold began after that end", inFlightDup)
	}
	if rewoundDup > 0 {
		c.note("%d duplicate reads exempt: a paused holder's late write set the counter back between them", rewoundDup)
	}
	if lostDup > 0 {
		c.note("%d duplicate reads exempt: the holds' overlap is explained by a flush (data loss) within the lease bound", lostDup)
	}
	return c.result()
}

// counterWrite is an ok write and the hold it was made under.
type counterWrite struct {
	s span
	w *Write
}

// paused reports whether the write landed after its hold's effective end
// because its process was paused: made after SIGCONT, before the late
// timer ended the hold, or in flight when SIGSTOP froze the process
// between its read and its write (the read is stale when the write lands:
// what no lock service can prevent, and fencing can).
func (g counterWrite) paused() bool {
	return g.s.paused != nil && g.w.Return > g.s.end && g.w.Invoke <= g.s.rec
}

// inFlightAtEnd reports whether the write began inside its hold and
// returned after the hold's effective end.
func (g counterWrite) inFlightAtEnd() bool {
	return g.w.Invoke <= g.s.end && g.w.Return > g.s.end
}

// landedAfter reports whether g, in flight when its hold ended, explains
// a read it shares with o: o's hold began after g's ended, and o's write
// began before g's returned.
func (g counterWrite) landedAfter(o counterWrite) bool {
	return g.inFlightAtEnd() && o.s.start >= g.s.end && o.w.Invoke < g.w.Return
}

// rewound reports whether one of the paused writes ps set the counter back
// below v between a's write and b's (a before b, both reading v): it read
// less than v, and may have landed after a's write began and before b's
// ended.
func rewound(ps []counterWrite, a, b counterWrite, v int64) bool {
	for _, p := range ps {
		if p.w.Read < v && p.w.Return > a.w.Invoke && p.w.Invoke < b.w.Return {
			return true
		}
	}
	return false
}

// counterOf is the counter a hold's writes go to: its key, or a
// multi-lock's first member's.
func counterOf(o *Op) string {
	if (o.Kind == KindMulti || o.Kind == KindMultiAtomic) && len(o.Keys) > 0 {
		return o.Keys[0]
	}
	return o.Key
}
