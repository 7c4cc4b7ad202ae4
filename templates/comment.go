package templates

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/dave/jennifer/jen"
)

// comment emits // lines; an empty string gives a bare "//" and a line
// starting with a tab stays a tab-indented (code) line.
func comment(lines ...string) jen.Code {
	s := jen.Null()
	for i, line := range lines {
		if i > 0 {
			s.Line()
		}
		line = clean(line)
		switch {
		case line == "":
			s.Comment("//")
		case strings.HasPrefix(line, "\t"):
			s.Comment("//" + line)
		default:
			s.Comment("// " + line)
		}
	}
	return s
}

// clean makes user text safe inside a // comment: no line breaks, no
// control characters, valid UTF-8, no trailing space.
func clean(s string) string {
	s = strings.ToValidUTF8(s, string(utf8.RuneError))
	s = strings.Map(func(r rune) rune {
		if r == '\t' {
			return r
		}
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' || r == '\ufeff' {
			return ' '
		}
		return r
	}, s)
	return strings.TrimRight(s, " \t")
}

// docLines splits a spec doc into comment lines, dropping blank edges.
func docLines(doc string) []string {
	doc = strings.TrimSpace(strings.ReplaceAll(doc, "\r\n", "\n"))
	if doc == "" {
		return nil
	}
	lines := strings.Split(doc, "\n")
	for i := range lines {
		lines[i] = strings.TrimRight(lines[i], " \t\r")
	}
	return lines
}
