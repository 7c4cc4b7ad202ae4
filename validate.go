package lockgen

import (
	"strings"
)

// validate checks the rules that span fields and locks. Field syntax has
// been checked while parsing; this adds every remaining error to e.
func validate(s *Spec, e *errs) {
	for _, l := range s.Locks {
		if l.broken {
			continue
		}
		validateKind(l, e)
		validateKey(l, e)
	}
	validateMembers(s, e)
	validateNames(s, e)
}

// validateKind checks that the lock's fields fit its kind, and reports a
// kind the runtime does not implement yet.
func validateKind(l *Lock, e *errs) {
	path := "locks." + l.Name
	if l.Kind == "" {
		return // unknown kind, already reported
	}
	if !l.Kind.Implemented() {
		e.add(l.kindPos, path+".kind", "kind %q is not implemented yet by the runtime (use reentrant for now; %s comes in a later release)", l.Kind, l.Kind)
	}
	validateFairness(l, e)
	if l.quorumPos.Line > 0 && l.Kind != Red {
		e.add(l.quorumPos, path+".quorum", "only red locks have a quorum (remove it, or set kind: red)")
	}
	if l.Kind == Multi {
		if l.Key.set {
			e.add(l.Key.pos, path+".key", "a multi lock has no key of its own: it takes its members' keys (remove key)")
		}
		if l.Slot.set {
			e.add(l.Slot.pos, path+".slot", "a multi lock has no slot of its own: set slot on its members (remove slot)")
		}
		if l.paramsPos.Line > 0 {
			e.add(l.paramsPos, path+".params", "a multi lock's params are the union of its members' (remove params)")
		}
		if l.membersPos.Line == 0 {
			e.add(l.Pos, path+".members", "missing: a multi lock needs the locks it takes (add members: [OrderLock, InventoryLock])")
		} else if len(l.Members) < 2 && len(l.memberPos) == len(l.Members) {
			e.add(l.membersPos, path+".members", "a multi lock needs at least two members (list two or more, or use the member itself)")
		}
		return
	}
	if l.membersPos.Line > 0 {
		e.add(l.membersPos, path+".members", "only multi locks have members (remove it, or set kind: multi)")
	}
	if !l.Key.set {
		e.add(l.Pos, path+".key", "missing (add a key pattern such as key: \"%s:${id}\")", strings.ToLower(strings.TrimSuffix(l.Name, "Lock")))
	}
}

// validateFairness checks that a lock's fairness fields fit its kind:
// queueTimeout is for fair locks, writers for readwrite locks.
func validateFairness(l *Lock, e *errs) {
	f := l.Fairness
	if f == nil {
		return
	}
	path := "locks." + l.Name + ".fairness"
	switch l.Kind {
	case Fair:
		if f.writersPos.Line > 0 {
			e.add(f.writersPos, path+".writers", "writers is for readwrite locks: a fair lock has no readers, and serves every waiter in arrival order (remove it, or set kind: readwrite)")
		}
	case ReadWrite:
		if f.queueTimeoutPos.Line > 0 {
			e.add(f.queueTimeoutPos, path+".queueTimeout", "queueTimeout is for fair locks: a readwrite lock keeps no queue of waiters (remove it; writers: first makes waiting writers go before new readers)")
		}
	default:
		want := Fair
		if f.writersPos.Line > 0 && f.queueTimeoutPos.Line == 0 {
			want = ReadWrite
		}
		e.add(f.pos, path, "only fair and readwrite locks have fairness (remove it, or set kind: %s)", want)
	}
}

// validateKey checks placeholders against params, and the slot.
func validateKey(l *Lock, e *errs) {
	if l.Kind == Multi {
		return
	}
	path := "locks." + l.Name
	declared := map[string]bool{}
	names := make([]string, 0, len(l.Params))
	for _, p := range l.Params {
		declared[p.Name] = true
		names = append(names, p.Name)
	}
	used := map[string]bool{}
	check := func(pt Pattern, field string) {
		for _, s := range pt.Segments {
			if s.Param == "" {
				continue
			}
			used[s.Param] = true
			if declared[s.Param] || l.rejected[s.Param] {
				continue
			}
			fix := "declare it under params, e.g. params: {" + s.Param + ": string}"
			if sug := suggest(s.Param, names); sug != "" {
				fix = "did you mean ${" + sug + "}?"
			}
			e.add(pt.at(s.off), path+"."+field, "placeholder ${%s} is not a declared param (%s)", s.Param, fix)
		}
	}
	check(l.Key, "key")
	check(l.Slot, "slot")
	for _, p := range l.Params {
		if !used[p.Name] && l.Key.set {
			e.add(p.namePos, path+".params."+p.Name, "param %q is not used in key (add ${%s} to the key, or remove the param)", p.Name, p.Name)
		}
	}
	if l.Slot.set && l.Key.set && l.Key.hasTag() {
		e.add(l.Slot.pos, path+".slot", "the key already has a literal hash tag {...} (remove slot, or the braces from key)")
	}
}

// validateMembers checks multi-lock members: they exist, are listed once,
// form no cycle, and agree on the types of params they share.
func validateMembers(s *Spec, e *errs) {
	byName := map[string]*Lock{}
	for _, l := range s.Locks {
		if _, dup := byName[l.Name]; !dup {
			byName[l.Name] = l
		}
	}
	for _, l := range s.Locks {
		if l.Kind != Multi {
			continue
		}
		path := "locks." + l.Name + ".members"
		seen := map[string]bool{}
		for i, m := range l.Members {
			at := l.memberPos[i]
			switch {
			case m == l.Name:
				e.add(at, path, "a lock cannot be its own member (remove %s)", m)
			case byName[m] == nil:
				e.add(at, path, "no lock named %q (%s)", m, didYouMean(m, lockNames(s, l.Name)))
			case seen[m]:
				e.add(at, path, "%s is listed twice (remove one)", m)
			}
			seen[m] = true
		}
		if cycle := memberCycle(l, byName, nil); cycle != nil {
			e.add(l.membersPos, path, "member cycle %s (a multi lock cannot contain itself; remove one member)", strings.Join(cycle, " -> "))
			continue
		}
		types := map[string]string{}
		from := map[string]string{}
		for i, m := range l.Members {
			for _, p := range unionParams(byName[m], byName, 0) {
				t := p.Type.String()
				if prev, ok := types[p.Name]; ok && prev != t {
					e.add(l.memberPos[i], path, "param %s is %s in %s but %s in %s (give the members one type for %s)", p.Name, prev, from[p.Name], t, m, p.Name)
					continue
				}
				types[p.Name], from[p.Name] = t, m
			}
		}
	}
}

// memberCycle returns the path of a cycle through l's members, or nil.
func memberCycle(l *Lock, byName map[string]*Lock, stack []string) []string {
	for i, s := range stack {
		if s == l.Name {
			return append(append([]string{}, stack[i:]...), l.Name)
		}
	}
	if l.Kind != Multi || len(stack) > len(byName) {
		return nil
	}
	stack = append(stack, l.Name)
	for _, m := range l.Members {
		if ml := byName[m]; ml != nil && ml != l {
			if c := memberCycle(ml, byName, stack); c != nil {
				return c
			}
		}
	}
	return nil
}

// unionParams is the params of l, or of its members for a multi lock.
func unionParams(l *Lock, byName map[string]*Lock, depth int) []*Param {
	if l == nil || depth > len(byName) {
		return nil
	}
	if l.Kind != Multi {
		return l.Params
	}
	var out []*Param
	for _, m := range l.Members {
		if m != l.Name {
			out = append(out, unionParams(byName[m], byName, depth+1)...)
		}
	}
	return out
}

func lockNames(s *Spec, except string) []string {
	var names []string
	for _, l := range s.Locks {
		if l.Name != except {
			names = append(names, l.Name)
		}
	}
	return names
}

// validateNames checks that the generated methods of different locks do
// not collide (a lock named WithOrderLock next to OrderLock), and that no
// param shadows a generated helper.
func validateNames(s *Spec, e *errs) {
	owner := map[string]string{}
	helpers := map[string]bool{}
	for _, l := range s.Locks {
		for _, m := range methodNames(l) {
			if o, taken := owner[m]; taken && o != l.Name {
				e.add(l.Pos, "locks."+l.Name, "the generated method %s collides with the one of %s (rename one of the locks)", m, o)
				break
			}
			owner[m] = l.Name
		}
		helpers[lowerFirst(l.Name)+"Key"] = true
		helpers[lowerFirst(l.Name)+"Options"] = true
	}
	for _, l := range s.Locks {
		for _, p := range l.Params {
			if helpers[p.Name] {
				e.add(p.namePos, "locks."+l.Name+".params."+p.Name, "param name %q is the name of a generated helper (rename the param)", p.Name)
			}
		}
	}
}

// methodNames lists the methods generated on *Locks for l.
func methodNames(l *Lock) []string {
	if l.Kind == ReadWrite {
		return []string{l.Name, "With" + l.Name + "Read", "With" + l.Name + "Write"}
	}
	return []string{l.Name, "With" + l.Name}
}
