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

func posn(fset *token.FileSet, p token.Pos) Posn {
	pos := fset.Position(p)
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
	Mode    string   // "read" or "write" for a readwrite lock's With<Name>Read/Write, else ""
	With    bool     // With<Name>(ctx, params..., fn); else the handle constructor <Name>(params...)
	Permit  bool     // a semaphore: taking it takes a permit
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
	At   Posn   // the call in the function that takes it (directly or through Via)
	Via  string // "" when the call takes the lock itself, else how: "through f, which takes it at p"
	// Permit: Lock is a semaphore, and the call takes one of its permits.
	Permit bool
}

// acquires is the fact on a function: every lock a call of it may take.
type acquires struct {
	Acqs []Acq // sorted by Lock
}

func (*acquires) AFact() {}

func (a *acquires) String() string {
	names := make([]string, len(a.Acqs))
	for i, q := range a.Acqs {
		names[i] = display(q.Lock)
	}
	return "acquires " + strings.Join(names, ", ")
}

// Edge says: lock To is taken while lock From is held.
type Edge struct {
	From, To string
	At       Posn   // the call that takes To (or the call through which it is taken)
	Held     Posn   // the call that took From
	Via      string // how the call at At takes To, when not directly
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
