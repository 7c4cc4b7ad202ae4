package robustness

// The fencing checker.
//
// Model (design.md §8): every acquisition of a fenced lock INCRs the
// lock's token counter and returns the new value (Op.N of the hold). The
// holder writes its token to a fenced register in the storage server,
// which is never faulted and refuses a token lower than the last it
// accepted. So:
//
//   - (a) tokens grow with acquisitions: a hold that ended (effectively,
//     as check_exclusion.go computes it) before another's acquire returned
//     has the smaller token;
//   - (b) the accepted writes of one register, in real time, carry
//     non-decreasing tokens (check_linear.go also checks the register with
//     porcupine);
//   - (c) a refusal is explained by the hold's ctx: it was done, with a
//     cause reporting the lock lost (or its Client closed, or its hold
//     cut by a Shutdown, which gives the lock back), no later than
//     the refusal's return (up to PauseSlack later if its process was
//     paused and resumed meanwhile: its timer fires late), or the hold was
//     released before; a ctx done earlier for another cause (the caller
//     gave up) cannot report a later loss, so there the release must have
//     found the lock lost (or the hold cut by a Shutdown of its Client,
//     which another goroutine sharing the Client may call), or the write
//     came after the hold's fixed lease
//     had run out in Redis (from the acquire's return on). Fenced workers
//     write without looking at their ctx, sometimes after it is done, to
//     exercise refusals.
//
// Documented limit: FLUSHALL resets the token counter, so after a flush
// tokens start over: (a) is exempt for a pair of holds with a flush
// between the first's invoke and the second's return, and (c) for
// refusals after a flush. Both are counted in the notes.

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
)

// CheckFencing checks fencing tokens and the fenced register's writes.
// Checked counts fenced holds and their writes.
func CheckFencing(h *History, lim Limits) Result {
	f := newFacts(h, lim)
	c := newCollector(CheckNameFencing)
	holds := map[string][]span{}
	for _, o := range h.Ops {
		if o.Kind == KindFenced && o.Holds() {
			holds[o.Key] = append(holds[o.Key], f.span(o))
			c.res.Checked += 1 + len(o.Writes)
		}
	}
	fc := &fencing{facts: f, c: c}
	for _, key := range sortedKeys(holds) {
		fc.tokens(key, holds[key])
		fc.accepted(key, holds[key])
		fc.refusals(key, holds[key])
	}
	if fc.flushedPairs > 0 {
		c.note("%d acquisitions exempt from growing tokens: a flush (token counter reset) came between an earlier hold's invoke and their return", fc.flushedPairs)
	}
	if fc.doaPairs > 0 {
		c.note("%d acquisitions exempt from growing tokens: dead on arrival (their ctx done at their return: the acquisition reached Redis long before its reply came back)", fc.doaPairs)
	}
	if fc.flushedRefusals > 0 {
		c.note("%d refusals exempt: after a flush (the token counter restarted below the register's last token)", fc.flushedRefusals)
	}
	if fc.releasedRefusals > 0 {
		c.note("%d refusals of writes made after their hold's release was invoked", fc.releasedRefusals)
	}
	if fc.closedRefusals > 0 {
		c.note("%d refusals after the hold's ctx was done because its Client was closed or shut down", fc.closedRefusals)
	}
	if fc.expiredRefusals > 0 {
		c.note("%d refusals after the hold's ctx was done for another cause, of writes made after its fixed lease ran out", fc.expiredRefusals)
	}
	if fc.earlyDoneRefusals > 0 {
		c.note("%d refusals after the hold's ctx was done for another cause, of holds whose release found the lock lost or cut by a Shutdown", fc.earlyDoneRefusals)
	}
	return c.result()
}

// shutdownCut is in the cause of a hold that a Client's Shutdown ended
// (its ctx ran out before the hold was released): Shutdown gives the
// lock back at once, so another owner may take it and a later token be
// accepted (seed 479264011: a goroutine sharing the Client shut it down).
const shutdownCut = "lock client shutting down"

// closedBy reports whether a hold's ctx ended because its Client was
// closed (its lock stays until its lease runs out) or shut down (its
// lock is given back).
func closedBy(cause string) bool {
	return strings.Contains(cause, "client closed") || strings.Contains(cause, shutdownCut)
}

type fencing struct {
	*facts
	c                 *collector
	flushedPairs      int
	doaPairs          int
	flushedRefusals   int
	releasedRefusals  int
	closedRefusals    int
	earlyDoneRefusals int
	expiredRefusals   int
}

// lastLossBefore is when the last flush of the lock server that started
// before t was answered (math.MinInt64: none): a hold invoked before then
// may have drawn its token before the FLUSHALL ran, so only holds invoked
// from then on are compared with a hold acquired at t.
func (fc *fencing) lastLossBefore(t int64) int64 {
	last := int64(math.MinInt64)
	for _, fl := range fc.losses {
		if lossAffects(fl, KindFenced) && fl.Start < t {
			last = max(last, fl.End)
		}
	}
	return last
}

// tokens checks (a). It walks the holds in order of their acquire's
// return, with the holds that ended before it added in order of their end;
// the highest token among those is what the new one must exceed. A flush
// between the earlier hold's invoke and the new return exempts the pair,
// so only ended holds invoked at or after the last flush count: when that
// flush changes, the best is recomputed (flushes are few).
func (fc *fencing) tokens(key string, spans []span) {
	byRet := slices.Clone(spans)
	slices.SortFunc(byRet, byStart)
	byEnd := slices.Clone(spans)
	slices.SortFunc(byEnd, func(a, b span) int { return cmp.Compare(a.end, b.end) })
	var ended []span
	best, bestAll := -1, -1 // in ended: the highest token invoked since the last flush, and overall
	epoch := int64(math.MinInt64)
	j := 0
	for _, b := range byRet {
		if e := fc.lastLossBefore(b.start); e != epoch {
			epoch, best = e, -1
			for i := range ended {
				if ended[i].op.Invoke >= epoch && (best < 0 || ended[i].op.N > ended[best].op.N) {
					best = i
				}
			}
		}
		for ; j < len(byEnd) && byEnd[j].end < b.start; j++ {
			ended = append(ended, byEnd[j])
			i := len(ended) - 1
			if bestAll < 0 || ended[i].op.N > ended[bestAll].op.N {
				bestAll = i
			}
			if ended[i].op.Invoke >= epoch && (best < 0 || ended[i].op.N > ended[best].op.N) {
				best = i
			}
		}
		switch {
		case b.doa:
			// Its acquisition reached Redis and its lease ran out before
			// its reply came back: its token may predate the others'.
			if bestAll >= 0 && ended[bestAll].op.N >= b.op.N {
				fc.doaPairs++
			}
		case best >= 0 && ended[best].op.N >= b.op.N:
			a := ended[best]
			fc.c.add(Violation{
				Msg: fmt.Sprintf("key %s: token %d of %s is not above token %d of %s, which ended before it was acquired",
					key, b.op.N, fc.holdName(b), a.op.N, fc.holdName(a)),
				From: a.start, To: b.start, Ops: []*Op{a.op, b.op},
			})
		case bestAll >= 0 && ended[bestAll].op.N >= b.op.N:
			fc.flushedPairs++
		}
	}
}

// accepted checks (b): walking the accepted writes in order of their
// invoke, the highest token among the writes that returned before it must
// not exceed its own.
func (fc *fencing) accepted(key string, spans []span) {
	type acc struct {
		s span
		w *Write
	}
	var ws []acc
	for _, s := range spans {
		for i := range s.op.Writes {
			if w := &s.op.Writes[i]; w.Outcome == OutOK {
				ws = append(ws, acc{s, w})
			}
		}
	}
	byInvoke := slices.Clone(ws)
	slices.SortFunc(byInvoke, func(a, b acc) int { return cmp.Compare(a.w.Invoke, b.w.Invoke) })
	byReturn := ws
	slices.SortFunc(byReturn, func(a, b acc) int { return cmp.Compare(a.w.Return, b.w.Return) })
	var best *acc
	j := 0
	for i := range byInvoke {
		b := &byInvoke[i]
		for ; j < len(byReturn) && byReturn[j].w.Return < b.w.Invoke; j++ {
			if best == nil || byReturn[j].w.Read > best.w.Read {
				best = &byReturn[j]
			}
		}
		if best != nil && best.w.Read > b.w.Read {
			fc.c.add(Violation{
				Msg: fmt.Sprintf("register %s: stale token accepted: token %d written at %s..%s (%s) after token %d was accepted at %s..%s (%s)",
					key, b.w.Read, fc.ms(b.w.Invoke), fc.ms(b.w.Return), opName(b.s.op),
					best.w.Read, fc.ms(best.w.Invoke), fc.ms(best.w.Return), opName(best.s.op)),
				From: best.w.Invoke, To: b.w.Return, Ops: []*Op{best.s.op, b.s.op},
			})
		}
	}
}

// refusals checks (c).
func (fc *fencing) refusals(key string, spans []span) {
	for _, s := range spans {
		o := s.op
		for i := range o.Writes {
			w := &o.Writes[i]
			if w.Outcome != OutFail {
				continue
			}
			if fc.lastLossBefore(w.Return) != math.MinInt64 {
				fc.flushedRefusals++
				continue
			}
			if o.ReleaseInvoke <= w.Return {
				fc.releasedRefusals++
				continue
			}
			slack := int64(0)
			if fc.pausedBetween(o.Proc, o.Return, w.Return) {
				slack = int64(fc.lim.PauseSlack)
			}
			lost := strings.Contains(o.Cause, "lock lost")
			closed := closedBy(o.Cause)
			if o.Done != Never && (lost || closed) && o.Done <= w.Return+slack {
				if closed && !lost {
					fc.closedRefusals++
				}
				continue
			}
			if o.Done != Never && o.Done <= w.Return && (strings.Contains(o.ReleaseErr, "lock lost") || strings.Contains(o.ReleaseErr, "not held") ||
				strings.Contains(o.ReleaseErr, shutdownCut)) {
				// Its ctx was done for another cause first (the caller
				// gave up), so it could not report the loss, which its
				// release found (or the cut of a Shutdown, which gave the
				// lock back: seed 479264011, a goroutine sharing the
				// Client shut it down).
				fc.earlyDoneRefusals++
				continue
			}
			if o.Done != Never && o.Done <= w.Return && o.Lease > 0 && w.Invoke >= o.Return+o.Lease {
				// Its ctx was done for another cause first, and the
				// write came after its fixed lease had run out in Redis
				// (the lease counts from the try's send, before the
				// return): the lock was free to be taken, whether or not
				// a release could tell (its process may be gone first).
				fc.expiredRefusals++
				continue
			}
			why := "its hold's ctx was never done"
			switch {
			case o.Done != Never && !lost && !closed:
				why = fmt.Sprintf("its hold's ctx was done at %s for another cause (%q)", fc.ms(o.Done), o.Cause)
			case o.Done != Never:
				why = fmt.Sprintf("its hold's ctx reported the loss only at %s, %s after the refusal", fc.ms(o.Done), dur(o.Done-w.Return))
			}
			fc.c.add(Violation{
				Msg: fmt.Sprintf("register %s: write of token %d at %s..%s refused, but %s: %s",
					key, w.Read, fc.ms(w.Invoke), fc.ms(w.Return), why, fc.holdName(s)),
				From: s.start, To: min(plus(w.Return, fc.lim.PauseSlack), max(w.Return, o.Done)), Ops: []*Op{o},
			})
		}
	}
}

// pausedBetween reports whether process proc was paused at some time in
// [from, to].
func (fc *fencing) pausedBetween(proc int, from, to int64) bool {
	for _, p := range fc.pauses[proc] {
		if p.Start <= to && p.End >= from {
			return true
		}
	}
	return false
}
