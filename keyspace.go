package lockgen

import (
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"

	"github.com/lockgen/lockgen/templates"
)

// validateKeySpaces refuses two locks whose keys can be the same Redis key:
// two lock layouts on one key exclude each other by accident (a read lock
// granted while a Mutex holds the key) or fail with WRONGTYPE. Each key
// pattern is read as the language of the keys it can render (keyLanguage);
// two locks collide when some key is in both, which keysOverlap decides
// exactly. order:${id} and invoice:${id} never meet; order:${id} (int64)
// and order:${name} (string) do, at order:0.
func validateKeySpaces(s *Spec, e *errs) {
	type keyed struct {
		l    *Lock
		prog *syntax.Prog
	}
	var seen []keyed
	for _, l := range s.Locks {
		if l.broken || l.Kind == Multi || !l.Key.set {
			continue
		}
		prog, ok := keyLanguage(l)
		if !ok {
			continue
		}
		for _, o := range seen {
			if key, ok := keysOverlap(o.prog, prog); ok {
				e.add(l.Key.pos, "locks."+l.Name+".key", "%s and %s can render the same Redis key (e.g. %s): two locks on one key exclude each other by accident or fail with WRONGTYPE (make the literal text of one key differ, e.g. another prefix)", o.l.Name, l.Name, strconv.Quote(key))
				break
			}
		}
		seen = append(seen, keyed{l, prog})
	}
}

// keyLanguage compiles the keys l can render as a regexp program: its
// literal text as is, and each placeholder as what its type renders to
// (ParamType.KeyClass). ok is false when a param's type is unknown.
func keyLanguage(l *Lock) (*syntax.Prog, bool) {
	types := map[string]ParamType{}
	for _, p := range l.Params {
		types[p.Name] = p.Type
	}
	var re strings.Builder
	for _, s := range l.KeyPattern().Segments {
		if s.Param == "" {
			re.WriteString(regexp.QuoteMeta(s.Lit))
			continue
		}
		t, ok := types[s.Param]
		if !ok || t.Path != "" && t.render == 0 {
			// Undeclared, or a user type not resolved yet: Render
			// checks again once it knows how the type renders.
			return nil, false
		}
		re.WriteString("(?:" + t.KeyClass() + ")")
	}
	parsed, err := syntax.Parse(re.String(), syntax.Perl)
	if err != nil {
		return nil, false
	}
	prog, err := syntax.Compile(parsed.Simplify())
	if err != nil {
		return nil, false
	}
	return prog, true
}

// KeyClass is a regular expression of what a value of type t can render
// to in a key: integers and bools as strconv writes them (user types with
// such an underlying type too, once resolved); strings, other user types
// and unresolved ones (the widest) through keyPart, which escapes braces.
// Package inspect matches keys with it too.
func (t ParamType) KeyClass() string {
	switch {
	case t.render == templates.RenderInt:
		return `-?[0-9]+`
	case t.render == templates.RenderUint:
		return `[0-9]+`
	case t.render == templates.RenderBool:
		return `true|false`
	}
	switch t.Basic {
	case "int", "int8", "int16", "int32", "int64", "rune":
		return `-?[0-9]+`
	case "uint", "uint8", "uint16", "uint32", "uint64", "byte":
		return `[0-9]+`
	case "bool":
		return `true|false`
	}
	return `[^{}]*`
}

// keysOverlap reports whether a key matches both programs as a whole, and
// a shortest such key. It walks the product of the two programs' states,
// trying one rune of each class of runes the programs tell apart.
func keysOverlap(a, b *syntax.Prog) (string, bool) {
	reps := representatives(a, b)
	type pair struct{ i, j uint32 }
	type step struct {
		from pair
		r    rune
	}
	came := map[pair]step{}
	var queue []pair
	push := func(from pair, r rune, as, bs []uint32) {
		for _, i := range as {
			for _, j := range bs {
				p := pair{i, j}
				if _, ok := came[p]; !ok {
					came[p] = step{from, r}
					queue = append(queue, p)
				}
			}
		}
	}
	start := pair{^uint32(0), ^uint32(0)}
	push(start, -1, closure(a, uint32(a.Start)), closure(b, uint32(b.Start)))
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		ia, ib := &a.Inst[p.i], &b.Inst[p.j]
		if ia.Op == syntax.InstMatch && ib.Op == syntax.InstMatch {
			var key []rune
			for q := p; q != start; q = came[q].from {
				if r := came[q].r; r >= 0 {
					key = append(key, r)
				}
			}
			slices.Reverse(key)
			return string(key), true
		}
		if ia.Op == syntax.InstMatch || ib.Op == syntax.InstMatch {
			continue
		}
		for _, r := range reps {
			if ia.MatchRune(r) && ib.MatchRune(r) {
				push(p, r, closure(a, ia.Out), closure(b, ib.Out))
			}
		}
	}
	return "", false
}

// closure lists the instructions reachable from pc without reading a
// rune that read one or match.
func closure(p *syntax.Prog, pc uint32) []uint32 {
	var out []uint32
	seen := map[uint32]bool{}
	var walk func(pc uint32)
	walk = func(pc uint32) {
		if seen[pc] {
			return
		}
		seen[pc] = true
		switch in := &p.Inst[pc]; in.Op {
		case syntax.InstAlt, syntax.InstAltMatch:
			walk(in.Out)
			walk(in.Arg)
		case syntax.InstCapture, syntax.InstNop, syntax.InstEmptyWidth:
			walk(in.Out)
		case syntax.InstFail:
		default:
			out = append(out, pc)
		}
	}
	walk(pc)
	return out
}

// representatives is one rune of each range of runes that every
// instruction of a and b either reads all of or none of: the bounds of
// their rune ranges cut the runes into such ranges.
func representatives(a, b *syntax.Prog) []rune {
	cuts := []rune{0, 'a', '0'}
	for _, p := range []*syntax.Prog{a, b} {
		for _, in := range p.Inst {
			switch in.Op {
			case syntax.InstRune:
				for k := 0; k+1 < len(in.Rune); k += 2 {
					cuts = append(cuts, in.Rune[k], in.Rune[k+1]+1)
				}
			case syntax.InstRune1:
				cuts = append(cuts, in.Rune[0], in.Rune[0]+1)
			}
			if in.Op == syntax.InstRune && len(in.Rune) == 1 {
				cuts = append(cuts, in.Rune[0], in.Rune[0]+1)
			}
		}
	}
	slices.Sort(cuts)
	cuts = slices.Compact(cuts)
	// Printable runes first, so that the key shown is readable.
	slices.SortStableFunc(cuts, func(x, y rune) int { return printable(y) - printable(x) })
	return cuts
}

func printable(r rune) int {
	if r > ' ' && r < 0x7f {
		return 1
	}
	return 0
}
