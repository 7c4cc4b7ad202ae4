package vet

import (
	"go/token"

	"golang.org/x/tools/go/analysis"
)

// A finding is a short message at its position, and the detail on lines
// of its own below it, each at the position it is about: the Related
// information of an analysis.Diagnostic, which go vet prints as
//
//	x.go:15:10: lock-order inversion: …
//	x.go:11:9: 	locks.OrderLock is taken here
//	y.go:15:10: 	locks.OrderLock is taken while locks.InventoryLock is held: …

// Note is a position a finding refers to, and what happens there.
type Note struct {
	At      Posn
	Message string
}

// positions turns Posns back into token.Pos in a FileSet: one shared by
// every package lockgen vet loads, so a note can point into another
// package. go vet gives each package a FileSet of its own files; a note
// about another package then names its position in the message.
type positions struct {
	fset  *token.FileSet
	files map[string]*token.File
}

func (p *positions) pos(at Posn) token.Pos {
	if p.files == nil {
		p.files = make(map[string]*token.File)
		p.fset.Iterate(func(f *token.File) bool {
			if _, ok := p.files[f.Name()]; !ok {
				p.files[f.Name()] = f
			}
			return true
		})
	}
	tf := p.files[at.File]
	if tf == nil || at.Line < 1 || at.Line > tf.LineCount() || at.Col < 1 {
		return token.NoPos
	}
	off := tf.Offset(tf.LineStart(at.Line)) + at.Col - 1
	if off > tf.Size() {
		return token.NoPos
	}
	return tf.Pos(off)
}

// related resolves notes for a finding at pos.
func (p *positions) related(pos token.Pos, notes []Note) []analysis.RelatedInformation {
	out := make([]analysis.RelatedInformation, len(notes))
	for i, n := range notes {
		if at := p.pos(n.At); at.IsValid() {
			out[i] = analysis.RelatedInformation{Pos: at, Message: n.Message}
		} else {
			out[i] = analysis.RelatedInformation{Pos: pos, Message: n.At.String() + ": " + n.Message}
		}
	}
	return out
}

// Diagnostic is the finding at the inversion's edge, at pos (where fset
// has inv.At.At), with its notes as related information.
func (inv Inversion) Diagnostic(fset *token.FileSet, pos token.Pos) analysis.Diagnostic {
	p := &positions{fset: fset}
	return analysis.Diagnostic{Pos: pos, Category: "lockorder", Message: inv.Message(), Related: p.related(pos, inv.Notes())}
}
