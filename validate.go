package lockgen

import (
	"strings"
	"unicode/utf8"
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
	validateKeySpaces(s, e)
}

// validateKey checks placeholders against params, and the slot.
func validateKey(l *Lock, e *errs) {
	if l.Kind == Multi {
		return
	}
	path := "locks." + l.Name
	declared := map[string]bool{}
	for _, p := range l.Params {
		declared[p.Name] = true
	}
	used := map[string]bool{}
	check := func(pt Pattern, field string) {
		inPattern := map[string]bool{}
		var undeclared []string
		for _, s := range pt.Segments {
			if s.Param == "" || inPattern[s.Param] {
				continue
			}
			used[s.Param], inPattern[s.Param] = true, true
			if !declared[s.Param] && !l.rejected[s.Param] {
				undeclared = append(undeclared, s.Param)
			}
		}
		likely := suggestParams(undeclared, l.paramNames, inPattern)
		for _, s := range pt.Segments {
			if s.Param == "" || declared[s.Param] || l.rejected[s.Param] {
				continue
			}
			switch sug := likely[s.Param]; {
			case sug != "":
				e.add(pt.at(s.off), path+"."+field, "placeholder ${%s} is not a declared param (did you mean ${%s}?)", s.Param, sug)
			case isKeyword(s.Param):
				e.add(pt.at(s.off), path+"."+field, "placeholder ${%s} is a Go keyword, which cannot name a param (rename it, e.g. ${%s}, and declare it under params)", s.Param, keywordAlternative(s.Param))
			default:
				// Only the user knows the param's type: name none.
				e.add(pt.at(s.off), path+"."+field, "placeholder ${%s} is not a declared param (declare it under params with its Go type: params: {%s: <type>})", s.Param, s.Param)
			}
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
// are not red locks, form no cycle, and agree on the types of params they
// share. Then it flattens each multi lock whose members are all valid and
// checks the promise of atomic: true.
func validateMembers(s *Spec, e *errs) {
	byName := map[string]*Lock{}
	for _, l := range s.Locks {
		if _, dup := byName[l.Name]; !dup {
			byName[l.Name] = l
		}
	}
	var valid []*Lock
	for _, l := range s.Locks {
		if l.Kind == Multi && !l.broken && validateMemberList(s, l, byName, e) {
			valid = append(valid, l)
		}
	}
	// A second pass: a member declared further down has had its own
	// members checked by now.
	for _, l := range valid {
		leaves := leavesOf(l, byName)
		for _, lf := range leaves {
			if lf.lock.broken || lf.lock.Kind == Red || lf.lock.Kind == Semaphore || lf.lock.Kind == Latch || e.under("locks."+lf.lock.Name) || e.under("locks."+l.Members[lf.via]) {
				leaves = nil // reported already; the leaves would only repeat it
				break
			}
		}
		for _, lf := range leaves {
			l.leaves = append(l.leaves, lf.lock)
		}
		if l.Atomic && leaves != nil {
			validateAtomic(l, leaves, e)
		}
	}
}

// validateMemberList checks the members of multi lock l and reports
// whether they are all usable.
func validateMemberList(s *Spec, l *Lock, byName map[string]*Lock, e *errs) bool {
	path := "locks." + l.Name + ".members"
	ok := len(l.Members) >= 2
	seen := map[string]bool{}
	for i, m := range l.Members {
		at := l.memberPos[i]
		usable := false
		switch {
		case m == l.Name:
			e.add(at, path, "a lock cannot be its own member (remove %s)", m)
		case byName[m] == nil:
			e.add(at, path, "no lock named %q (%s)", m, didYouMean(m, lockNames(s, l.Name)))
		case seen[m]:
			e.add(at, path, "%s is listed twice (remove one)", m)
		case byName[m].Kind == Red:
			e.add(at, path, "%s is a red lock: it lives on the RedLock nodes, not on the Redis the other members share, so it cannot be taken with them (remove it from members)", m)
		case byName[m].Kind == Semaphore:
			e.add(at, path, "%s is a semaphore: its permits are shared by several holders, so it cannot be taken all-or-nothing with locks held by one owner (remove it from members; take a permit with With%s around the multi lock)", m, m)
		case byName[m].Fenced && byName[m].Kind == Reentrant:
			e.add(at, path, "%s is fenced: a multi lock takes its members without their fencing tokens, so its holders would write unfenced (take %s alone with With%s, or remove fenced from it)", m, m, m)
		case byName[m].Kind == Latch:
			e.add(at, path, "%s is a latch: it is awaited, not held, so it cannot be a member (remove it from members; call Await%s before taking the multi lock)", m, m)
		default:
			usable = true
		}
		seen[m] = true
		ok = ok && usable
	}
	if cycle := memberCycle(l, byName, nil); cycle != nil {
		e.add(l.membersPos, path, "member cycle %s (a multi lock cannot contain itself; remove one member)", strings.Join(cycle, " -> "))
		return false
	}
	types := map[string]string{}
	from := map[string]string{}
	for i, m := range l.Members {
		for _, p := range unionParams(byName[m], byName, 0) {
			t := p.Type.String()
			if prev, seen := types[p.Name]; seen && goAlias(prev) != goAlias(t) {
				e.add(l.memberPos[i], path, "param %s is %s in %s but %s in %s (give the members one type for %s)", p.Name, prev, from[p.Name], t, m, p.Name)
				ok = false
				continue
			}
			types[p.Name], from[p.Name] = t, m
		}
	}
	return ok
}

// leaf is a lock a multi lock takes, and the index of the member it comes
// through (itself, or a nested multi lock).
type leaf struct {
	lock *Lock
	via  int
}

// leavesOf flattens the members of multi lock l: nested multi locks give
// their members, in order, and a lock reached twice is taken once.
func leavesOf(l *Lock, byName map[string]*Lock) []leaf {
	var out []leaf
	seen := map[*Lock]bool{}
	var walk func(m *Lock, via, depth int)
	walk = func(m *Lock, via, depth int) {
		switch {
		case m == nil || depth > len(byName):
		case m.Kind == Multi:
			for _, n := range m.Members {
				walk(byName[n], via, depth+1)
			}
		case !seen[m]:
			seen[m] = true
			out = append(out, leaf{m, via})
		}
	}
	for i, m := range l.Members {
		walk(byName[m], i, 0)
	}
	return out
}

// validateAtomic checks what atomic: true promises: one script call can
// take every member, because all are reentrant and all their keys hash to
// the cluster slot of the first.
func validateAtomic(l *Lock, leaves []leaf, e *errs) {
	path := "locks." + l.Name + ".members"
	var first *Lock
	for _, lf := range leaves {
		m, at := lf.lock, l.memberPos[lf.via]
		name := m.Name
		if via := l.Members[lf.via]; via != m.Name {
			name += " (a member of " + via + ")"
		}
		if m.Kind != Reentrant {
			e.add(at, path, "%s is a %s lock, but atomic: true takes every member with one script, which only reentrant members allow (make %s reentrant, or remove atomic: the members are then taken in key order, with rollback)", name, m.Kind, m.Name)
			continue
		}
		if first == nil {
			first = m
			continue
		}
		if a, b := first.key().hashed(), m.key().hashed(); a != b {
			e.add(at, path, "%s may be in another cluster slot than %s (Redis hashes %s for it and %s for %s), but atomic: true needs every member in one slot (%s; or remove atomic)", name, first.Name, b, a, first.Name, slotFix(first, m, l.Name))
		}
	}
}

// slotFix says how to put locks a and b in one cluster slot: a hash tag
// over a param they share (the one a or b already hashes, if any), or a
// constant named after the multi lock.
func slotFix(a, b *Lock, multi string) string {
	value := ""
	for _, x := range []*Lock{a, b} {
		if tag, ok := x.key().tag(); ok && allDeclared(tag, a) && allDeclared(tag, b) {
			value = tag
			break
		}
	}
	for _, p := range a.Params {
		if value == "" && declares(b, p.Name) {
			value = "${" + p.Name + "}"
		}
	}
	constant := value == ""
	if constant {
		value = strings.ToLower(strings.TrimSuffix(multi, "Lock"))
		if value == "" {
			value = strings.ToLower(multi)
		}
	}
	var slot, retag []string
	for _, x := range []*Lock{a, b} {
		switch tag, _ := x.key().tag(); {
		case tag == value:
		case x.Key.hasTag():
			retag = append(retag, x.Name)
		default:
			slot = append(slot, x.Name)
		}
	}
	var fixes []string
	if len(slot) > 0 {
		fixes = append(fixes, "give "+strings.Join(slot, " and ")+" slot: \""+value+"\"")
	}
	if len(retag) > 0 {
		fixes = append(fixes, "make the hash tag in the key of "+strings.Join(retag, " and ")+" {"+value+"}")
	}
	fix := strings.Join(fixes, "; ")
	if constant {
		fix = "they share no param: " + fix + ", a constant that puts every key of both in one slot"
	}
	return fix
}

// allDeclared reports whether every placeholder of pattern text is a param of l.
func allDeclared(text string, l *Lock) bool {
	segs, _ := parsePattern(text, false)
	for _, s := range segs {
		if s.Param != "" && !declares(l, s.Param) {
			return false
		}
	}
	return true
}

func declares(l *Lock, param string) bool {
	for _, p := range l.Params {
		if p.Name == param {
			return true
		}
	}
	return false
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
	helpers := map[string]string{} // generated helper -> its lock
	for _, l := range s.Locks {
		for _, m := range methodNames(l) {
			if o, taken := owner[m]; taken && o != l.Name {
				e.add(l.Pos, "locks."+l.Name, "the generated method %s collides with the one of %s (rename one of the locks)", m, o)
				break
			}
			owner[m] = l.Name
		}
		// Distinct names can lower to one helper: the KELVIN SIGN in
		// "Korder" lowers to the k of "Korder".
		for _, h := range []string{lowerFirst(l.Name) + "Key", lowerFirst(l.Name) + "Options"} {
			if o, taken := helpers[h]; taken && o != l.Name {
				a, _ := utf8.DecodeRuneInString(o)
				b, _ := utf8.DecodeRuneInString(l.Name)
				e.add(l.Pos, "locks."+l.Name, "the generated helper %s collides with the one of %s: their first letters %U and %U lower to the same one (rename one of the locks)", h, o, a, b)
				break
			}
			helpers[h] = l.Name
		}
	}
	for _, l := range s.Locks {
		for _, p := range l.Params {
			if _, ok := helpers[p.Name]; ok {
				e.add(p.namePos, "locks."+l.Name+".params."+p.Name, "param name %q is the name of a generated helper (rename the param)", p.Name)
			}
		}
	}
}

// methodNames lists the methods generated on *Locks for l: the handle
// <Name>, and the helpers of its kind (package templates emits them).
func methodNames(l *Lock) []string {
	switch l.Kind {
	case ReadWrite:
		return []string{l.Name, "With" + l.Name + "Read", "With" + l.Name + "Write"}
	case Latch:
		return []string{l.Name, "Arm" + l.Name, "Await" + l.Name, "CountDown" + l.Name}
	}
	return []string{l.Name, "With" + l.Name}
}
