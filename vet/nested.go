package vet

import (
	"go/token"
	"strings"

	"golang.org/x/tools/go/analysis"
)

// checkNested reports an instance of a lock taken while another instance
// of it is held (category nested): LedgerLock(to) inside LedgerLock(from).
// A caller that nests them the other way round (a transfer the other
// way) holds the one this caller waits for, and waits for the one it
// holds. An instance written like one held here is a re-entry, and a
// TryLock that does not wait cannot deadlock; neither is reported. Nor
// are two read holds of a readwrite lock (readers share).
func (w *walker) checkNested(a Acq, here []string, pos token.Pos) {
	if a.NoWait || w.nestedAt[pos] {
		return
	}
	var held *region
	var heldKey []string
	heldKind := ""
	for _, hs := range [][]region{w.held, w.spans} {
		for i := range hs {
			h := &hs[i]
			for j, m := range h.op.members {
				if m != a.Lock || h.op.mode == "read" && a.Mode == "read" && !h.op.writersFirst {
					continue
				}
				var k []string
				if j < len(h.keys) {
					k = h.keys[j]
				}
				if !differ(k, here) {
					return // this very instance is held: a re-entry
				}
				if held == nil {
					held, heldKey = h, k
					if j < len(h.op.kinds) {
						heldKind = h.op.kinds[j]
					}
				}
			}
		}
	}
	if held == nil {
		return
	}
	w.nestedAt[pos] = true
	kind := a.Kind
	if kind == "" {
		kind = heldKind
	}
	inner, outer := instanceName(a.Lock, here), instanceName(a.Lock, heldKey)
	fix := "take both in one multi lock, or in a fixed order"
	if kind != "Mutex" {
		fix = "take them in a fixed order"
	}
	by := ""
	if held.op.lock != a.Lock {
		by = " (by " + display(held.op.lock) + ")"
	}
	notes := []analysis.RelatedInformation{note(held.call.Pos(),
		outer+" is taken here"+by+": with a caller that takes the two the other way round, each holds one and waits for the other until their wait times run out")}
	if a.Through != "" {
		p := w.positions.related(pos, []Note{{a.ThroughAt, "through " + a.Through + ", which takes " + display(a.Lock) + " here"}})
		notes = append(notes, p...)
	}
	notes = append(notes, note(pos, nestedFix(kind, a.Lock, held.op.lock, heldKey, here)))
	w.finding(pos, "nested", "nested instances of one lock: "+inner+" is taken while "+outer+" is held ("+fix+")", notes...)
}

// nestedFix says how to take two instances of lock without nesting
// them: a multi lock where the lock can be a member, else a fixed order,
// which the analyzer cannot prove and a //lockgen:ignore must vouch for.
// heldBy is the lock whose hold holds the outer instance (a multi lock
// holds its members).
func nestedFix(kind, lock, heldBy string, outer, inner []string) string {
	const order = "take them in a fixed order (say, the lower first) and say so with //lockgen:ignore <reason>"
	switch kind {
	case "Mutex":
		if strings.HasPrefix(lock, "runtime.") {
			return "fix: c.MultiLock over the two handles takes both in key order; or " + order
		}
		name := display(lock)
		handle := func(key []string) string {
			return "l." + name[strings.LastIndex(name, ".")+1:] + "(" + keyList(key) + ")"
		}
		if heldBy != lock {
			return "fix: c.MultiLock over " + handle(inner) + " and the members of " + display(heldBy) + " takes them all in key order; or " + order
		}
		return "fix: c.MultiLock(opts, " + handle(outer) + ", " + handle(inner) + ") takes both in key order; or " + order
	case "FencedLock":
		return "fix: a fenced lock cannot be a multi lock member (it would be taken without its token): " + order
	case "Semaphore":
		return "fix: a semaphore cannot be a multi lock member: " + order
	case "RedLock":
		return "fix: a red lock cannot be a multi lock member: " + order
	}
	return "fix: " + order
}
