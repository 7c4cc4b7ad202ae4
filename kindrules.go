package lockgen

import (
	"strings"
)

// kindRule says which kinds of lock take a field: a lock of another kind
// must not have it and, when required, a lock of these kinds must. The
// parser (validateKind) and the JSON Schema (its if/then conditions) are
// both made from kindRules.
type kindRule struct {
	field     string // a lock field, or fairness.<field>
	kinds     []Kind
	required  bool
	misplaced func(l *Lock) string // the error for a lock of another kind
	missing   func(l *Lock) string // the error for a lock of these kinds without it
}

func text(s string) func(*Lock) string { return func(*Lock) string { return s } }

// keyed are the kinds with a key of their own: all but multi.
var keyed = []Kind{Reentrant, Fair, ReadWrite, Red, Semaphore, Latch}

// leased are the kinds whose holds have a lease: all but latch.
var leased = []Kind{Reentrant, Fair, ReadWrite, Multi, Red, Semaphore}

// fencedMisplaced says why a kind takes no fencing token, and what to do.
var fencedMisplaced = map[Kind]string{
	Fair:      "a fair lock has no fencing token: Redisson's RFencedLock is its non-fair RLock, and lockgen keeps to Redisson's layouts so that Java and Go read one token (use kind: reentrant with fenced: true, or remove fenced)",
	ReadWrite: "neither side of a readwrite lock has a fencing token in Redisson's layouts, and readers could not be ordered by one (guard the writes with a separate fenced reentrant lock, or remove fenced)",
	Red:       "a red lock spans independent Redis nodes, each of which would count its own tokens: they form no single sequence, so they cannot fence (use a fenced reentrant lock on one Redis, or remove fenced)",
	Multi:     "a multi lock has no token of its own (make the member that guards the storage a fenced reentrant lock and take it alone, or remove fenced)",
	Semaphore: "a semaphore has several holders at once, and a token orders exclusive holders only (remove fenced)",
	Latch:     "a latch has no holder to fence (remove fenced)",
}

var kindRules = []kindRule{
	{field: "key", kinds: keyed, required: true,
		misplaced: text("a multi lock has no key of its own: it takes its members' keys (remove key)"),
		missing: func(l *Lock) string {
			return "missing (add a key pattern such as key: \"" + strings.ToLower(strings.TrimSuffix(l.Name, "Lock")) + ":${id}\")"
		}},
	{field: "slot", kinds: []Kind{Reentrant, Fair, ReadWrite, Red, Semaphore},
		misplaced: func(l *Lock) string {
			if l.Kind == Latch {
				return "a latch's channel wraps its whole name in braces (Redisson's naming), so a hash tag in the name would put the channel in another cluster slot than the latch (remove slot)"
			}
			return "a multi lock has no slot of its own: set slot on its members (remove slot)"
		}},
	{field: "params", kinds: keyed,
		misplaced: text("a multi lock's params are the union of its members' (remove params)")},
	{field: "members", kinds: []Kind{Multi}, required: true,
		misplaced: text("only multi locks have members (remove it, or set kind: multi)"),
		missing:   text("missing: a multi lock needs the locks it takes (add members: [OrderLock, InventoryLock])")},
	{field: "atomic", kinds: []Kind{Multi},
		misplaced: text("only multi locks have atomic (remove it, or set kind: multi)")},
	{field: "quorum", kinds: []Kind{Red},
		misplaced: text("only red locks have a quorum (remove it, or set kind: red)")},
	{field: "syncReplicas", kinds: []Kind{Reentrant, Fair, ReadWrite},
		misplaced: func(l *Lock) string {
			switch l.Kind {
			case Semaphore:
				return "a semaphore does not wait for replicas: its permits expire by their lease, so a failover at worst admits a holder early, once (remove syncReplicas)"
			case Latch:
				return "a latch does not wait for replicas (remove syncReplicas)"
			}
			if l.Kind == Red {
				return "a red lock does not wait for replicas: each RedLock node is an independent master, and the quorum of nodes is what lets a hold survive a crashed node (remove syncReplicas; raise quorum instead)"
			}
			return "a multi lock takes each member with the member's own syncReplicas (set it on the members, or in defaults, and remove it here)"
		}},
	{field: "fairness", kinds: []Kind{Fair, ReadWrite},
		misplaced: func(l *Lock) string {
			want := Fair
			if _, w := l.fieldAt["fairness.writers"]; w {
				if _, q := l.fieldAt["fairness.queueTimeout"]; !q {
					want = ReadWrite
				}
			}
			return "only fair and readwrite locks have fairness (remove it, or set kind: " + string(want) + ")"
		}},
	{field: "fairness.queueTimeout", kinds: []Kind{Fair},
		misplaced: text("queueTimeout is for fair locks: a readwrite lock keeps no queue of waiters (remove it; writers: first makes waiting writers go before new readers)")},
	{field: "fairness.writers", kinds: []Kind{ReadWrite},
		misplaced: text("writers is for readwrite locks: a fair lock has no readers, and serves every waiter in arrival order (remove it, or set kind: readwrite)")},
	{field: "lease", kinds: leased,
		misplaced: text("a latch has no holder, so nothing to lease (remove lease)")},
	{field: "fenced", kinds: []Kind{Reentrant},
		misplaced: func(l *Lock) string { return fencedMisplaced[l.Kind] }},
	{field: "permits", kinds: []Kind{Semaphore}, required: true,
		misplaced: text("only semaphores have permits (remove it, or set kind: semaphore)"),
		missing:   text("missing: a semaphore needs the number of holders it admits at once (add permits: 10)")},
	{field: "count", kinds: []Kind{Latch}, required: true,
		misplaced: text("only latches have a count (remove it, or set kind: latch)"),
		missing:   text("missing: a latch needs the number of count-downs its waiters wait for (add count: 3)")},
}

func hasKind(kinds []Kind, k Kind) bool {
	for _, x := range kinds {
		if x == k {
			return true
		}
	}
	return false
}

// validateKind checks the lock's fields against its kind with kindRules.
func validateKind(l *Lock, e *errs) {
	if l.Kind == "" {
		return // unknown kind, already reported
	}
	path := "locks." + l.Name
	fired := map[string]bool{}
	for _, r := range kindRules {
		if parent, _, nested := strings.Cut(r.field, "."); nested && fired[parent] {
			continue // the whole parent is misplaced: its fields would repeat it
		}
		at, present := l.fieldAt[r.field]
		switch {
		case present && !hasKind(r.kinds, l.Kind):
			fired[r.field] = true
			e.add(at, path+"."+r.field, "%s", r.misplaced(l))
		case !present && r.required && hasKind(r.kinds, l.Kind):
			e.add(l.Pos, path+"."+r.field, "%s", r.missing(l))
		}
	}
	if _, ok := l.fieldAt["members"]; ok && l.Kind == Multi && len(l.Members) < 2 && !l.membersBroken && len(l.memberPos) == len(l.Members) {
		e.add(l.membersPos, path+".members", "a multi lock needs at least two members (list two or more, or use the member itself)")
	}
}

// kindConditions are kindRules as JSON Schema conditions on a lock: a
// field present requires one of its kinds (an absent kind is reentrant),
// and a required field must be present for its kinds.
func kindConditions() []*schema {
	var out []*schema
	for _, r := range kindRules {
		kinds := make([]string, len(r.kinds))
		for i, k := range r.kinds {
			kinds[i] = string(k)
		}
		kindIn := func() *schema {
			s := &schema{props: []prop{{"kind", &schema{enum: strs(kinds...)}}}}
			if !hasKind(r.kinds, Reentrant) {
				s.required = []string{"kind"}
			}
			return s
		}
		present := has(r.field)
		if parent, child, nested := strings.Cut(r.field, "."); nested {
			present = has(parent)
			present.props[0].s = has(child)
			present.props[0].s.types = []string{"object"}
		}
		name := r.field[strings.LastIndexByte(r.field, '.')+1:]
		out = append(out, &schema{ifS: present, thenS: kindIn(),
			want: "only " + orList(kinds) + " locks have " + name + " (remove it, or set kind: " + kinds[0] + ")"})
		if r.required {
			out = append(out, &schema{ifS: kindIn(), thenS: has(r.field),
				want: "a " + orList(kinds) + " lock needs " + name + " (add it)"})
		}
	}
	return out
}

// has is the schema of an object that has field (strict validators want
// a required property declared beside it).
func has(field string) *schema {
	return &schema{required: []string{field}, props: []prop{{field, &schema{}}}}
}

// orList joins names as prose: "a", "a or b", "a, b or c".
func orList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
