package vet

import (
	"go/token"
	"strings"

	"golang.org/x/tools/go/analysis"
)

const ignoreDirective = "//lockgen:ignore"

// ignores are the lines a //lockgen:ignore comment silences: its own, and
// the next one when the comment stands alone on its line.
type ignores struct {
	lines map[string]map[int]bool
}

func collectIgnores(pass *analysis.Pass) *ignores {
	ig := &ignores{lines: make(map[string]map[int]bool)}
	for _, f := range pass.Files {
		var src []byte
		for _, cg := range f.Comments {
			for _, c := range cg.List {
				rest, ok := strings.CutPrefix(c.Text, ignoreDirective)
				if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '\t') {
					continue
				}
				// The reason ends where another comment starts on the line.
				reason, _, _ := strings.Cut(rest, "//")
				if strings.TrimSpace(reason) == "" {
					pass.Report(analysis.Diagnostic{Pos: c.Pos(), Category: "ignore",
						Message: "//lockgen:ignore needs a reason: say why the finding is safe here (//lockgen:ignore <reason>)"})
					continue
				}
				pos := pass.Fset.PositionFor(c.Pos(), false) // the file's own name and lines, not a //line directive's
				if ig.lines[pos.Filename] == nil {
					ig.lines[pos.Filename] = make(map[int]bool)
				}
				ig.lines[pos.Filename][pos.Line] = true
				if src == nil {
					src, _ = pass.ReadFile(pos.Filename)
				}
				if alone(src, pos.Offset) {
					ig.lines[pos.Filename][pos.Line+1] = true
				}
			}
		}
	}
	return ig
}

// alone reports whether only blanks precede offset on its line.
func alone(src []byte, offset int) bool {
	if offset > len(src) {
		return false
	}
	for i := offset - 1; i >= 0 && src[i] != '\n'; i-- {
		if src[i] != ' ' && src[i] != '\t' {
			return false
		}
	}
	return true
}

func (ig *ignores) covers(fset *token.FileSet, p token.Pos) bool {
	pos := fset.PositionFor(p, false)
	return ig.lines[pos.Filename][pos.Line]
}
