package lockgen

import (
	"bytes"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// locks walks the locks mapping: name -> lock.
func (p *parser) locks(s *Spec, n *yaml.Node) {
	n = deref(n)
	if n.Kind == yaml.MappingNode && len(n.Content) == 0 && p.locksReported {
		return // its entries were lock fields, reported
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" || n.Kind == yaml.MappingNode && len(n.Content) == 0 {
		p.add(pos(n), "locks", "no locks declared (add one, e.g. OrderLock: {key: \"order:${orderID}\", params: {orderID: int64}})")
		return
	}
	for _, f := range p.fields(n, "locks", nil) {
		path := "locks." + f.name
		name := f.name
		switch {
		case !isIdent(name):
			p.add(pos(f.key), path, "lock name %q is not a Go identifier (write it as %s)", name, camel(name))
		case !isExported(name):
			p.add(pos(f.key), path, "lock name %q is not exported (write it as %s)", name, camel(name))
		}
		l := p.lock(s, name, path, f)
		s.Locks = append(s.Locks, l)
	}
}

// misindented moves, in the document, the entries of the locks mapping
// that are not locks but a lock's fields indented one level too shallow,
// where they read as lock names:
//
//	OrderLock:
//	  key: "order:${orderID}"
//	params:              <- belongs under OrderLock
//	  orderID: int64
//
// It reports each once, saying how to indent it, and moves it under the
// lock before it, so that the parser and the schema check read the lock
// with it and no follow-on error appears. A field with no lock before it
// is reported and dropped.
func (p *parser) misindented(root *yaml.Node) {
	var n *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		if deref(root.Content[i]).Value == "locks" {
			n = deref(root.Content[i+1])
		}
	}
	if n == nil || n.Kind != yaml.MappingNode {
		return
	}
	var kept []*yaml.Node
	var owner *yaml.Node // the value node of the last lock
	var ownerKey *yaml.Node
	ownerCol := 0 // the column of the owner's own fields
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), n.Content[i+1]
		if k.Kind != yaml.ScalarNode || !contains(lockFields, k.Value) {
			kept = append(kept, n.Content[i], v)
			ownerKey = k
			owner = deref(v)
			ownerCol = k.Column + 2
			if owner.Kind == yaml.MappingNode && len(owner.Content) > 0 {
				ownerCol = owner.Content[0].Column
			}
			if owner.Kind == yaml.ScalarNode && owner.ShortTag() == "!!null" {
				// OrderLock: with its fields below it, too shallow: they
				// become its mapping.
				*owner = yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: owner.Line, Column: owner.Column}
			}
			continue
		}
		path := "locks." + k.Value
		switch {
		case owner == nil:
			p.add(pos(k), path, "%q is a field of a lock, but it is written where lock names go, directly under locks: (write the lock's name first, e.g. OrderLock:, and indent its fields under it)", k.Value)
			p.locksReported = true
			continue
		case owner.Kind == yaml.MappingNode && owner.Style&yaml.FlowStyle != 0:
			p.add(pos(k), path, "%q is a field of a lock, but it is indented like a lock name (move it into %s's {...})", k.Value, ownerKey.Value)
		default:
			p.add(pos(k), path, "%q is a field of a lock, but it is indented like a lock name (indent it %s to column %d, under %s like its other fields)", k.Value, spaces(ownerCol-k.Column), ownerCol, ownerKey.Value)
		}
		if owner.Kind == yaml.MappingNode {
			owner.Content = append(owner.Content, n.Content[i], v)
		}
	}
	n.Content = kept
}

func spaces(n int) string {
	if n == 1 {
		return "1 more space"
	}
	return strconv.Itoa(n) + " more spaces"
}

// lock reads one lock; the spec's defaults fill what it leaves out.
func (p *parser) lock(s *Spec, name, path string, f field) *Lock {
	l := &Lock{Name: name, Pos: pos(f.key), Kind: Reentrant, Lease: s.Defaults.Lease, WaitTime: s.Defaults.WaitTime, SyncReplicas: s.Defaults.SyncReplicas}
	v := deref(f.val)
	if v.Kind != yaml.MappingNode {
		l.broken = true
		p.add(pos(v), path, "a lock must be a mapping of its fields, got %s (write e.g. %s: {key: \"order:${orderID}\", params: {orderID: int64}})", kindName(v), name)
		return l
	}
	var kindPos Pos
	kindSet := false
	l.fieldAt = map[string]Pos{}
	for _, lf := range p.fields(v, path, lockFields) {
		fp := path + "." + lf.name
		// Errors about a field's place point at its value, or at its name
		// where the value may be a whole block.
		l.fieldAt[lf.name] = pos(deref(lf.val))
		switch lf.name {
		case "atomic", "syncReplicas", "fairness", "fenced":
			l.fieldAt[lf.name] = pos(lf.key)
		}
		switch lf.name {
		case "doc":
			if d, ok := p.scalar(lf.val, fp, "one line or a | block of text"); ok {
				l.Doc = d
			}
		case "kind":
			kindPos, kindSet = pos(deref(lf.val)), true
			p.kind(l, lf.val, fp)
		case "key":
			l.Key = p.pattern(lf.val, fp, true, `a key pattern such as "order:${orderID}"`)
		case "slot":
			l.Slot = p.pattern(lf.val, fp, false, `a pattern such as "${tenant}"`)
		case "params":
			p.params(l, lf.val, fp)
		case "lease":
			if x, ok := p.lease(lf.val, fp); ok {
				l.Lease = x
			}
		case "waitTime":
			if x, ok := p.wait(lf.val, fp); ok {
				l.WaitTime = x
			}
		case "syncReplicas":
			l.syncReplicasPos = pos(lf.key)
			if n, ok := p.replicas(lf.val, fp); ok {
				l.SyncReplicas = n
			}
		case "fairness":
			l.Fairness = p.fairness(l, lf, fp)
		case "members":
			p.members(l, lf.val, fp)
		case "atomic":
			l.atomicPos = pos(lf.key)
			l.Atomic = p.boolean(lf.val, fp, "atomic: true, or leave it out")
		case "quorum":
			p.quorum(l, lf.val, fp)
		case "fenced":
			l.Fenced = p.boolean(lf.val, fp, "fenced: true, or leave it out")
		case "permits":
			if n, ok := p.positive(lf.val, fp, "permits", "how many holders the semaphore admits at once, e.g. permits: 10"); ok {
				l.Permits = n
			}
		case "count":
			if n, ok := p.positive(lf.val, fp, "count", "how many parties must count down before the waiters go on, e.g. count: 3"); ok {
				l.Count = n
			}
		default:
			p.add(pos(lf.key), fp, "lockgen does not read this field yet (report this: the schema knows it, the parser does not)")
		}
	}
	if !kindSet {
		kindPos = l.Pos
	}
	l.kindPos = kindPos
	switch l.Kind {
	case Multi, Red, Semaphore, Latch:
		// defaults.syncReplicas is for the kinds that can wait for
		// replicas; written on the lock itself, validation reports it.
		l.SyncReplicas = 0
	}
	return l
}

// fairness reads queueTimeout (fair) and writers (readwrite); which kind
// may have which is checked by validation.
func (p *parser) fairness(l *Lock, f field, path string) *Fairness {
	fz := &Fairness{QueueTimeout: DefaultQueueTimeout, pos: pos(f.key)}
	for _, ff := range p.fields(f.val, path, fairnessFields) {
		fp := path + "." + ff.name
		l.fieldAt["fairness."+ff.name] = pos(ff.key)
		switch ff.name {
		case "queueTimeout":
			fz.queueTimeoutPos = pos(ff.key)
			if d, ok := p.duration(ff.val, fp, false); ok {
				fz.QueueTimeout = d
				if d < minLease {
					// The runtime refuses it: waiters refresh their places
					// every queueTimeout/3, too often below that.
					p.add(pos(deref(ff.val)), fp, "queueTimeout %s is shorter than the runtime's minimum %s (write at least 10ms)", deref(ff.val).Value, minLease)
				}
			}
		case "writers":
			fz.writersPos = pos(ff.key)
			v, ok := p.scalar(ff.val, fp, "first, or redisson (the default)")
			switch {
			case !ok:
			case v == writersFirst:
				fz.WritersFirst = true
			case v != writersRedisson:
				p.add(pos(deref(ff.val)), fp, "%q is not a writer order (%s)", v, didYouMean(v, writerOrders))
			}
		default:
			p.add(pos(ff.key), fp, "lockgen does not read this field yet (report this: the schema knows it, the parser does not)")
		}
	}
	return fz
}

func (p *parser) kind(l *Lock, n *yaml.Node, path string) {
	v, ok := p.scalar(n, path, "one of "+kindList())
	if !ok {
		return
	}
	for _, k := range Kinds {
		if string(k) == v {
			l.Kind = k
			return
		}
	}
	names := make([]string, len(Kinds))
	for i, k := range Kinds {
		names[i] = string(k)
	}
	p.add(pos(deref(n)), path, "unknown kind %q (%s)", v, didYouMean(v, names))
	l.Kind = ""
}

func kindList() string {
	names := make([]string, len(Kinds))
	for i, k := range Kinds {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}

// pattern reads a key (tags true) or slot and reports its syntax errors at
// the offending character.
func (p *parser) pattern(n *yaml.Node, path string, tags bool, want string) Pattern {
	v, ok := p.scalar(n, path, want)
	n = deref(n)
	pt := Pattern{Text: v, pos: pos(n), set: true}
	if n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) == 0 {
		pt.cols = columns(p.line(pt.pos.Line), pt.pos.Col, n.Style, v)
	}
	if !ok {
		return pt
	}
	if v == "" {
		p.add(pt.pos, path, "is empty (write %s)", want)
		return pt
	}
	segs, probs := parsePattern(v, tags)
	for _, pr := range probs {
		p.add(pt.at(pr.off), path, "%s", pr.msg)
	}
	pt.Segments = segs
	for i := 1; i < len(segs); i++ {
		if segs[i].Param != "" && segs[i-1].Param != "" {
			p.add(pt.at(segs[i].off), path, "placeholders ${%s} and ${%s} are adjacent, so different values could render the same key (put a separator such as : between them)", segs[i-1].Param, segs[i].Param)
		}
	}
	return pt
}

// line returns line n (1-based) of the spec, or "".
func (p *parser) line(n int) string {
	src := p.src
	for ; n > 1 && len(src) > 0; n-- {
		i := bytes.IndexByte(src, '\n')
		if i < 0 {
			return ""
		}
		src = src[i+1:]
	}
	if i := bytes.IndexByte(src, '\n'); i >= 0 {
		src = src[:i]
	}
	return string(src)
}

// columns maps each byte offset of value (and its end) to its column in
// line, where the scalar starts at column col (1-based, in characters, as
// YAML counts) with the given style. It reads the escapes of a quoted
// scalar, so that "\u00fc:${}" puts ${ at its own column, not at the
// decoded text's. nil when the scalar is not on the line as expected
// (folded over lines, or an escape it does not know): positions fall
// back to the value's.
func columns(line string, col int, style yaml.Style, value string) []int {
	raw := []rune(line)
	i := col - 1 // index in raw of the scalar's first character
	quoted := style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0
	if quoted {
		i++
	}
	var cols []int
	for _, want := range value {
		if i >= len(raw) {
			return nil
		}
		at, width := i, 1
		switch {
		case style&yaml.SingleQuotedStyle != 0 && raw[i] == '\'':
			width = 2 // '' is one '
		case style&yaml.DoubleQuotedStyle != 0 && raw[i] == '\\':
			width = escapeWidth(raw[i+1:])
			if width == 0 {
				return nil
			}
			width++
		case raw[i] != want:
			return nil
		}
		for range utf8.RuneLen(want) {
			cols = append(cols, at+1)
		}
		i += width
	}
	return append(cols, i+1)
}

// escapeWidth is how many characters after a backslash a YAML escape
// takes, or 0 for one columns does not read.
func escapeWidth(r []rune) int {
	if len(r) == 0 {
		return 0
	}
	switch r[0] {
	case 'x':
		return 3
	case 'u':
		return 5
	case 'U':
		return 9
	case '0', 'a', 'b', 't', '\t', 'n', 'v', 'f', 'r', 'e', ' ', '"', '/', '\\', 'N', '_', 'L', 'P':
		return 1
	}
	return 0
}

// params reads the params mapping, keeping declaration order: it is the
// order of the generated function's parameters.
func (p *parser) params(l *Lock, n *yaml.Node, path string) {
	n = deref(n)
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return
	}
	l.paramsPos = pos(n)
	l.rejected = map[string]bool{}
	if n.Kind != yaml.MappingNode {
		l.broken = true
	}
	for _, f := range p.fields(n, path, nil) {
		l.rejected[f.name] = true
		fp := path + "." + f.name
		switch {
		case isKeyword(f.name):
			p.add(pos(f.key), fp, "param name %q is a Go keyword, which cannot name a parameter (rename it, e.g. %s, in params and key)", f.name, keywordAlternative(f.name))
			continue
		case !isIdent(f.name):
			p.add(pos(f.key), fp, "param name %q is not a Go identifier (write it as %s)", f.name, lowerFirst(camel(f.name)))
			continue
		case f.name == "_":
			p.add(pos(f.key), fp, "param name \"_\" is the blank identifier, which the generated code cannot pass on (rename it, e.g. id, in params and key)")
			continue
		case isPredeclared(f.name):
			p.add(pos(f.key), fp, "param name %q is predeclared in Go, and the generated code uses it unshadowed (rename it, e.g. %sValue, in params and key)", f.name, f.name)
			continue
		case isReservedParam(f.name):
			p.add(pos(f.key), fp, "param name %q is used by the generated code (rename it, e.g. %sID)", f.name, f.name)
			continue
		}
		l.paramNames = append(l.paramNames, f.name)
		t, ok := p.scalar(f.val, fp, "a Go type such as int64 or string, or import/path.Type")
		if !ok {
			continue
		}
		pt, msg := parseParamType(t)
		if msg != "" {
			p.add(pos(deref(f.val)), fp, "%s", msg)
			continue
		}
		delete(l.rejected, f.name)
		l.Params = append(l.Params, &Param{Name: f.name, Type: pt, Pos: pos(deref(f.val)), namePos: pos(f.key)})
	}
}

func (p *parser) members(l *Lock, n *yaml.Node, path string) {
	n = deref(n)
	l.membersPos = pos(n)
	if n.Kind != yaml.SequenceNode {
		l.membersBroken = true
		example := "[OrderLock, InventoryLock]"
		if n.Kind == yaml.MappingNode && len(n.Content) >= 2 {
			var names []string
			for i := 0; i < len(n.Content); i += 2 {
				names = append(names, deref(n.Content[i]).Value)
			}
			example = "[" + strings.Join(names, ", ") + "]"
		}
		p.add(pos(n), path, "must be a list of lock names, got %s (write members: %s)", kindName(n), example)
		return
	}
	for _, m := range n.Content {
		m = deref(m)
		name, ok := p.scalar(m, path, "a lock name such as OrderLock")
		if !ok {
			continue
		}
		l.Members = append(l.Members, name)
		l.memberPos = append(l.memberPos, pos(m))
	}
}

func (p *parser) quorum(l *Lock, n *yaml.Node, path string) {
	v, ok := p.scalar(n, path, "majority or a number of nodes")
	if !ok {
		return
	}
	at := pos(deref(n))
	l.quorumPos = at
	if v == "majority" {
		return
	}
	q, err := wholeNumber(v)
	switch {
	case err != nil && suggest(v, []string{"majority"}) != "":
		p.add(at, path, "%q is not a quorum (did you mean \"majority\"?)", v)
	case err != nil:
		p.add(at, path, "%q is not a quorum (write majority, or a number of nodes such as 3)", v)
	case q < 1:
		p.add(at, path, "quorum %d: at least one node must grant the lock (write majority, or a number of nodes >= 1)", q)
	case q > maxNumber:
		p.add(at, path, "quorum %s: must be at most %s (write majority, or a number of nodes such as 3)", v, maxNumberText)
	default:
		l.Quorum.N = int(q)
	}
}
