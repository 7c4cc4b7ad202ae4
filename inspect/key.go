package inspect

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/lockgen/lockgen"
)

// keyParam escapes a string-like param value as the generated keyPart
// does, so a value renders to the key the application uses.
var keyEscaper = strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")

// renderKey renders l's key from the params given on the command line,
// as the generated code would from typed values. It reports a missing or
// ill-typed param as a UsageError.
func renderKey(l *lockgen.Lock, params map[string]string) (string, error) {
	types := map[string]lockgen.ParamType{}
	for _, p := range l.Params {
		types[p.Name] = p.Type
	}
	var b strings.Builder
	for _, s := range l.KeyPattern().Segments {
		if s.Param == "" {
			b.WriteString(s.Lit)
			continue
		}
		v, ok := params[s.Param]
		if !ok {
			return "", usagef("%s needs %s=<%s> (its key is %s)", l.Name, s.Param, types[s.Param], l.KeyPattern().Text)
		}
		text, err := renderValue(types[s.Param], v)
		if err != nil {
			return "", usagef("%s=%q: %v", s.Param, v, err)
		}
		b.WriteString(text)
	}
	return b.String(), nil
}

// renderValue is a value as key text: integers and bools are checked and
// written in canonical form (as strconv does), anything else is escaped as
// a string (a user type's String or MarshalText text, as given).
func renderValue(t lockgen.ParamType, v string) (string, error) {
	switch t.Basic {
	case "int", "int8", "int16", "int32", "int64", "rune":
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return "", fmt.Errorf("not an integer (write a decimal number)")
		}
		return strconv.FormatInt(n, 10), nil
	case "uint", "uint8", "uint16", "uint32", "uint64", "byte":
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return "", fmt.Errorf("not an unsigned integer (write a decimal number)")
		}
		return strconv.FormatUint(n, 10), nil
	case "bool":
		b, err := strconv.ParseBool(v)
		if err != nil {
			return "", fmt.Errorf("not a bool (write true or false)")
		}
		return strconv.FormatBool(b), nil
	}
	return keyEscaper.Replace(v), nil
}

// matcher finds the live instances of one lock's key pattern: glob is the
// SCAN MATCH pattern, re checks a key exactly and captures its params.
type matcher struct {
	glob   string
	re     *regexp.Regexp
	params []string // the names of re's groups, in order
	tag    string   // the literal hash tag text, when the whole tag is literal
}

// globEscaper escapes the characters SCAN's MATCH treats specially.
var globEscaper = strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`)

func newMatcher(l *lockgen.Lock) *matcher {
	types := map[string]lockgen.ParamType{}
	for _, p := range l.Params {
		types[p.Name] = p.Type
	}
	m := &matcher{}
	var glob, re strings.Builder
	re.WriteString("^")
	seen := map[string]bool{}
	for _, s := range l.KeyPattern().Segments {
		if s.Param == "" {
			glob.WriteString(globEscaper.Replace(s.Lit))
			re.WriteString(regexp.QuoteMeta(s.Lit))
			continue
		}
		if !strings.HasSuffix(glob.String(), "*") {
			glob.WriteString("*")
		}
		if seen[s.Param] {
			// A repeated param must have the same value: Go's regexp has
			// no back-references, so keys are checked after the match.
			re.WriteString("(" + valueClass(types[s.Param]) + ")")
			m.params = append(m.params, s.Param)
			continue
		}
		seen[s.Param] = true
		re.WriteString("(" + valueClass(types[s.Param]) + ")")
		m.params = append(m.params, s.Param)
	}
	re.WriteString("$")
	m.glob = glob.String()
	m.re = regexp.MustCompile(re.String())
	m.tag = literalTag(l.KeyPattern())
	return m
}

// valueClass is what a rendered value of type t can look like. Escaped
// strings never hold braces.
func valueClass(t lockgen.ParamType) string {
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

// match reports whether key is an instance of the pattern, with its params.
func (m *matcher) match(key string) (map[string]string, bool) {
	sub := m.re.FindStringSubmatch(key)
	if sub == nil {
		return nil, false
	}
	params := map[string]string{}
	for i, name := range m.params {
		if v, ok := params[name]; ok && v != sub[i+1] {
			return nil, false
		}
		params[name] = sub[i+1]
	}
	return params, true
}

// literalTag is the first hash tag of p with its braces when it holds no
// placeholder: every key of the pattern then lives in that tag's slot.
func literalTag(p lockgen.Pattern) string {
	var b strings.Builder
	open := false
	for _, s := range p.Segments {
		if s.Param != "" {
			if open {
				return "" // a placeholder inside the tag: any slot
			}
			continue
		}
		for i := 0; i < len(s.Lit); i++ {
			switch c := s.Lit[i]; {
			case !open && c == '{':
				open = true
			case open && c == '}':
				if b.Len() == 0 {
					return ""
				}
				return "{" + b.String() + "}"
			case open:
				b.WriteByte(c)
			}
		}
	}
	return ""
}
