package lockgen

import (
	"fmt"
	"sort"
	"strings"
)

// Pos is a 1-based line and column in a spec file.
type Pos struct {
	Line, Col int
}

// Error is one problem found in a spec: where it is, which field, what is
// wrong and how to fix it.
type Error struct {
	File string // the spec's path as given, e.g. "locks.yaml"
	Pos  Pos
	Path string // the field, e.g. "locks.OrderLock.lease"; empty for syntax errors
	Msg  string // what is wrong (how to fix it)
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s:%d:%d: ", e.File, e.Pos.Line, e.Pos.Col)
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// ErrorList is every problem found in one spec, in file order. A spec with
// errors generates nothing.
type ErrorList []*Error

func (l ErrorList) Error() string {
	lines := make([]string, len(l))
	for i, e := range l {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// sorted orders the errors by position (then path, then message) so the
// output does not depend on the order the checks ran in.
func (l ErrorList) sorted() ErrorList {
	sort.SliceStable(l, func(i, j int) bool {
		a, b := l[i], l[j]
		if a.Pos.Line != b.Pos.Line {
			return a.Pos.Line < b.Pos.Line
		}
		if a.Pos.Col != b.Pos.Col {
			return a.Pos.Col < b.Pos.Col
		}
		if a.Path != b.Path {
			return a.Path < b.Path
		}
		return a.Msg < b.Msg
	})
	return l
}

// errs collects positioned errors for one file.
type errs struct {
	file string
	list ErrorList
}

func (e *errs) add(p Pos, path, format string, args ...any) {
	if p.Line < 1 {
		p.Line = 1
	}
	if p.Col < 1 {
		p.Col = 1
	}
	e.list = append(e.list, &Error{File: e.file, Pos: p, Path: path, Msg: fmt.Sprintf(format, args...)})
}

// under reports whether an error was added for path or a field below it.
func (e *errs) under(path string) bool {
	for _, x := range e.list {
		if x.Path == path || strings.HasPrefix(x.Path, path+".") {
			return true
		}
	}
	return false
}

func (e *errs) err() error {
	if len(e.list) == 0 {
		return nil
	}
	return e.list.sorted()
}
