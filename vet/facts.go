package vet

import (
	"fmt"
	"go/token"
	"path/filepath"
	"sort"
	"strings"
)

// Posn is a position that survives the trip between packages inside a
// fact (a token.Pos is only meaningful in the FileSet that made it).
type Posn struct {
	File      string
	Line, Col int
}

// posn is p in its file as the FileSet has it, not as a //line directive
// renames it: a Posn identifies a position (an edge, a note) and is found
// again in the files of a FileSet; the directive's position is for
// display, from the token.Pos found again.
func posn(fset *token.FileSet, p token.Pos) Posn {
	pos := fset.PositionFor(p, false)
	return Posn{File: pos.Filename, Line: pos.Line, Col: pos.Column}
}

// String is file:line:col, the file relative to the working directory
// when it lies below it (as the compiler prints it), else absolute.
func (p Posn) String() string {
	file := p.File
	if wd, err := filepath.Abs("."); err == nil {
		if rel, err := filepath.Rel(wd, file); err == nil && !strings.HasPrefix(rel, "..") {
			file = rel
		}
	}
	return fmt.Sprintf("%s:%d:%d", file, p.Line, p.Col)
}

// lockMethod is the fact on a method of a generated Locks type: which lock
// it names, and whether it is a With<Name> helper or a handle constructor.
type lockMethod struct {
	Lock    string   // the lock's identity: generated package path + "." + name
	Members []string // what taking it takes: a multi lock's members, else just Lock
	// MemberArgs: for a multi lock, which of its params each member gets
	// (indices into the params, -1 where a member's param is not one of
	// them); nil for any other lock, whose one member gets them all.
	MemberArgs [][]int
	// Kinds: each member's runtime handle type (Mutex, FencedLock, …).
	Kinds  []string
	Mode   string // "read" or "write" for a readwrite lock's With<Name>Read/Write, else ""
	With   bool   // With<Name>(ctx, params..., fn); else the handle constructor <Name>(params...)
	Permit bool   // a semaphore: taking it takes a permit
	// NoWait: the lock is declared with waitTime 0, so its With<Name> and
	// its handle's Do try once and fail rather than wait.
	NoWait bool
	// WritersFirst: a readwrite lock declared fairness: {writers: first}:
	// a new reader waits behind a queued writer, so a read inside a read
	// of it can wait too.
	WritersFirst bool
}

func (*lockMethod) AFact() {}

func (m *lockMethod) String() string {
	s := "handle " + m.Lock
	if m.With {
		s = "with " + m.Lock
	}
	if m.Mode != "" {
		s += " " + m.Mode
	}
	if len(m.Members) > 1 {
		s += " members " + strings.Join(m.Members, "+")
	}
	return s
}

// Acq is one lock a function may take when it is called, and where.
type Acq struct {
	Lock string
	At   Posn // the call in the function that takes it (directly or through Through)
	// Through is the function the call at At calls to take the lock, ""
	// when the call takes it itself; ThroughAt is where Through takes it.
	Through   string
	ThroughAt Posn
	// Permit: Lock is a semaphore, and the call takes one of its permits.
	Permit bool
	// Key is which instance of Lock the call takes: one template per
	// param of the lock (see instance.go), nil when unknown.
	Key  []string
	Kind string // the lock's runtime handle type (Mutex, FencedLock, …), "" when unknown
	Mode string // "read" or "write" for a side of a readwrite lock
	// NoWait: a TryLock with a wait of 0, which fails rather than waits.
	NoWait bool
}

// sumKey names an Acq in a function's summary: one entry per lock,
// instance and mode.
func (a Acq) sumKey() string {
	return fmt.Sprintf("%s\x01%s\x01%t\x01%s", a.Lock, a.Mode, a.NoWait, strings.Join(a.Key, "\x02"))
}

// acquires is the fact on a function: every lock a call of it may take.
type acquires struct {
	Acqs []Acq // sorted by Lock
}

func (*acquires) AFact() {}

func (a *acquires) String() string {
	var names []string
	for _, q := range a.Acqs {
		if n := display(q.Lock); len(names) == 0 || names[len(names)-1] != n {
			names = append(names, n)
		}
	}
	return "acquires " + strings.Join(names, ", ")
}

// Edge says: lock To is taken while lock From is held.
type Edge struct {
	From, To string
	At       Posn // the call that takes To (or the call through which it is taken)
	Held     Posn // the call that took From
	// Through is the function the call at At calls to take To, "" when
	// it takes To itself; ThroughAt is where Through takes it.
	Through   string
	ThroughAt Posn
	// FromPermit, ToPermit: that side is a semaphore (held: a permit).
	FromPermit, ToPermit bool
}

func (e Edge) key() string {
	return fmt.Sprintf("%s>%s@%s:%d:%d", e.From, e.To, e.At.File, e.At.Line, e.At.Col)
}

// Order is the package fact: every lock-order edge of the package and of
// everything it imports, so an importer sees the whole graph below it.
type Order struct {
	Edges []Edge // sorted, without duplicates
}

func (*Order) AFact() {}

func (o *Order) String() string {
	s := make([]string, len(o.Edges))
	for i, e := range o.Edges {
		s[i] = display(e.From) + ">" + display(e.To)
	}
	return "order " + strings.Join(s, " ")
}

func sortEdges(es []Edge) []Edge {
	seen := make(map[string]bool, len(es))
	out := es[:0:0]
	for _, e := range es {
		if k := e.key(); !seen[k] {
			seen[k] = true
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key() < out[j].key() })
	return out
}

// display shortens a lock identity for messages: the last element of the
// generated package's path and the lock's name (locks.OrderLock).
func display(id string) string {
	if i := strings.LastIndex(id, "/"); i >= 0 {
		return id[i+1:]
	}
	return id
}
