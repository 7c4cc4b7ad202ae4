package lockgen

import (
	"strings"
)

// Pattern is a key or slot template as written in the spec: literal text
// and ${param} placeholders. Literal {...} in a key are Redis hash tags.
type Pattern struct {
	Text     string
	Segments []Segment
	pos      Pos   // of the value
	cols     []int // column of each byte offset of Text, when known (see columns)
	set      bool  // the field was present
}

// Segment is one piece of a Pattern: literal text, or a placeholder naming
// a param (exactly one of the two is set).
type Segment struct {
	Lit   string
	Param string
	off   int // byte offset in Text, for positions
}

// Params lists the placeholders of the pattern in order, with repeats.
func (p Pattern) Params() []string {
	var names []string
	for _, s := range p.Segments {
		if s.Param != "" {
			names = append(names, s.Param)
		}
	}
	return names
}

// at is the position of byte offset off of the pattern's text: its
// column when known, else the value's position.
func (p Pattern) at(off int) Pos {
	if off < 0 || off >= len(p.cols) {
		return p.pos
	}
	return Pos{Line: p.pos.Line, Col: p.cols[off]}
}

// patternProblem is a syntax problem at a byte offset of a pattern.
type patternProblem struct {
	off int
	msg string
}

// parsePattern splits text into segments. When tags is true, literal
// braces are hash tags and must be balanced and unnested; otherwise (slot)
// they are not allowed at all.
func parsePattern(text string, tags bool) ([]Segment, []patternProblem) {
	var segs []Segment
	var probs []patternProblem
	lit := strings.Builder{}
	litOff := 0
	flush := func() {
		if lit.Len() > 0 {
			segs = append(segs, Segment{Lit: lit.String(), off: litOff})
			lit.Reset()
		}
	}
	open := -1 // offset of the unclosed literal '{', or -1
	for i := 0; i < len(text); {
		if strings.HasPrefix(text[i:], "${") {
			end := strings.IndexByte(text[i+2:], '}')
			if end < 0 {
				probs = append(probs, patternProblem{i, "unclosed placeholder \"${\" (close it with })"})
				break
			}
			name := text[i+2 : i+2+end]
			switch {
			case name == "":
				probs = append(probs, patternProblem{i, "empty placeholder \"${}\" (write ${name} with a declared param)"})
			case !isIdent(name) && !isKeyword(name):
				probs = append(probs, patternProblem{i, "placeholder \"${" + name + "}\" is not a Go identifier (name params like orderID)"})
			default:
				// A keyword is a param name the params check rejects;
				// keep it as a placeholder so only that one error shows.
				flush()
				segs = append(segs, Segment{Param: name, off: i})
			}
			i += 2 + end + 1
			litOff = i
			continue
		}
		c := text[i]
		switch {
		case (c == '{' || c == '}') && !tags:
			probs = append(probs, patternProblem{i, "slot must not contain { or } (lockgen adds the hash-tag braces itself)"})
		case c == '{' && open >= 0:
			probs = append(probs, patternProblem{i, "nested { inside a hash tag (Redis hashes only up to the first }; remove the inner brace)"})
		case c == '{':
			open = i
		case c == '}' && open < 0:
			probs = append(probs, patternProblem{i, "unbalanced } (a literal {...} is a Redis hash tag: add the opening { or remove it)"})
		case c == '}' && open == i-1:
			// Redis reads no tag from {}, so the runtime refuses the key.
			probs = append(probs, patternProblem{open, "empty hash tag {} (Redis hashes no tag from it, and the runtime refuses such a key: put what to hash inside, like {tenant}, or remove the braces)"})
			open = -1
		case c == '}':
			open = -1
		}
		if lit.Len() == 0 {
			litOff = i
		}
		lit.WriteByte(c)
		i++
	}
	flush()
	if open >= 0 {
		probs = append(probs, patternProblem{open, "unbalanced { (a literal {...} is a Redis hash tag: close it with } or remove it)"})
	}
	return segs, probs
}

// hasTag reports whether the pattern has a literal hash tag.
func (p Pattern) hasTag() bool {
	for _, s := range p.Segments {
		if strings.ContainsAny(s.Lit, "{}") {
			return true
		}
	}
	return false
}

// tag returns the content of the key's first hash tag as pattern text,
// and whether it has a non-empty one. Param values never contain braces
// (they are escaped), so where a tag starts and ends is fixed by the
// pattern's literal text.
func (p Pattern) tag() (string, bool) {
	var b strings.Builder
	open := false
	for _, s := range p.Segments {
		if s.Param != "" {
			if open {
				b.WriteString("${" + s.Param + "}")
			}
			continue
		}
		for i := 0; i < len(s.Lit); i++ {
			switch c := s.Lit[i]; {
			case !open && c == '{':
				open = true
			case open && c == '}':
				return b.String(), b.Len() > 0
			case open:
				b.WriteByte(c)
			}
		}
	}
	return "", false
}

// hashed is what Redis hashes to pick the key's cluster slot, as pattern
// text: the first hash tag, or the whole key when it has none (or an empty
// one, {}). Keys with equal hashed text and equal param values share a slot.
func (p Pattern) hashed() string {
	if tag, ok := p.tag(); ok {
		return "{" + tag + "}"
	}
	return p.Text
}

// withSlot returns the key with the slot applied as a hash tag: the first
// occurrence of the slot's text in the key is wrapped in braces, or, when
// the key does not contain it (or only inside a placeholder), "{slot}:" is
// put in front. Key and slot are already valid patterns.
//
// The result is built from segments, never by re-parsing text: a literal $
// right before the inserted { would read as a placeholder "${...}". Its
// Text is for display only and is ambiguous in that case.
func withSlot(key, slot Pattern) Pattern {
	open, closing := []Segment{{Lit: "{"}}, []Segment{{Lit: "}"}}
	i := strings.Index(key.Text, slot.Text)
	j := i + len(slot.Text)
	if i < 0 || slot.Text == "" || insidePlaceholder(key, i) || insidePlaceholder(key, j) {
		return joinSegments(key.pos, open, slot.Segments, closing, []Segment{{Lit: ":"}}, key.Segments)
	}
	before, rest := splitSegments(key.Segments, i)
	tagged, after := splitSegments(rest, j)
	return joinSegments(key.pos, before, open, tagged, closing, after)
}

// splitSegments cuts segs at byte offset off of their pattern's text,
// which must not fall inside a placeholder.
func splitSegments(segs []Segment, off int) (before, after []Segment) {
	for _, s := range segs {
		switch end := s.off + s.len(); {
		case end <= off:
			before = append(before, s)
		case s.off >= off:
			after = append(after, s)
		default: // a literal across off
			before = append(before, Segment{Lit: s.Lit[:off-s.off], off: s.off})
			after = append(after, Segment{Lit: s.Lit[off-s.off:], off: off})
		}
	}
	return before, after
}

// len is the length of the segment's text in its pattern.
func (s Segment) len() int {
	if s.Param != "" {
		return len(s.Param) + len("${}")
	}
	return len(s.Lit)
}

// joinSegments concatenates segment lists into a pattern at pos, merging
// adjacent literals and recomputing offsets and text.
func joinSegments(pos Pos, parts ...[]Segment) Pattern {
	var segs []Segment
	var text strings.Builder
	for _, part := range parts {
		for _, s := range part {
			s.off = text.Len()
			if s.Param != "" {
				text.WriteString("${" + s.Param + "}")
			} else {
				text.WriteString(s.Lit)
			}
			if n := len(segs); n > 0 && s.Param == "" && segs[n-1].Param == "" {
				segs[n-1].Lit += s.Lit
				continue
			}
			if s.Param != "" || s.Lit != "" {
				segs = append(segs, s)
			}
		}
	}
	return Pattern{Text: text.String(), Segments: segs, pos: pos, set: true}
}

// insidePlaceholder reports whether byte offset off falls strictly inside
// a ${...} of p (a cut there would break the placeholder).
func insidePlaceholder(p Pattern, off int) bool {
	for _, s := range p.Segments {
		if s.Param != "" && off > s.off && off < s.off+s.len() {
			return true
		}
	}
	return false
}
