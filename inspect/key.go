package inspect

import (
	"errors"
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

// renderValue is a value as key text: integers and bools are checked
// against their type (its range too) and written in canonical form (as
// strconv, and so the generated code, writes them), anything else is
// escaped as a string (a user type's String or MarshalText text, as given).
func renderValue(t lockgen.ParamType, v string) (string, error) {
	if bits, ok := intBits[t.Basic]; ok {
		n, err := strconv.ParseInt(v, 10, bits)
		if errors.Is(err, strconv.ErrRange) {
			return "", fmt.Errorf("out of %s's range (write %d to %d)", t.Basic, int64(-1)<<(bits-1), int64(1)<<(bits-1)-1)
		}
		if err != nil {
			return "", fmt.Errorf("not an integer (write a decimal number)")
		}
		return strconv.FormatInt(n, 10), nil
	}
	if bits, ok := uintBits[t.Basic]; ok {
		n, err := strconv.ParseUint(v, 10, bits)
		if errors.Is(err, strconv.ErrRange) {
			return "", fmt.Errorf("out of %s's range (write 0 to %d)", t.Basic, uint64(1)<<(bits-1)<<1-1)
		}
		if err != nil {
			return "", fmt.Errorf("not an unsigned integer (write a decimal number)")
		}
		return strconv.FormatUint(n, 10), nil
	}
	if t.Basic == "bool" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return "", fmt.Errorf("not a bool (write true or false)")
		}
		return strconv.FormatBool(b), nil
	}
	return keyEscaper.Replace(v), nil
}

// The sizes of the integer types (int and uint: 64 bits, as on every
// platform the runtime supports).
var (
	intBits  = map[string]int{"int": 64, "int8": 8, "int16": 16, "int32": 32, "rune": 32, "int64": 64}
	uintBits = map[string]int{"uint": 64, "uint8": 8, "byte": 8, "uint16": 16, "uint32": 32, "uint64": 64}
)

// keyUnescaper undoes keyEscaper.
var keyUnescaper = strings.NewReplacer("%25", "%", "%7B", "{", "%7D", "}")

// parseValue is the value a key's text was rendered from (renderValue's
// inverse); false when no value of type t renders to text, so that no
// generated helper could have made the key: an integer out of its type's
// range or not in canonical form (007, -0), a stray % in a string.
func parseValue(t lockgen.ParamType, text string) (string, bool) {
	v := text
	if !numberOrBool(t) {
		v = keyUnescaper.Replace(text)
	}
	r, err := renderValue(t, v)
	return v, err == nil && r == text
}

// numberOrBool reports whether t renders as a number or a bool, not as an
// escaped string.
func numberOrBool(t lockgen.ParamType) bool {
	_, i := intBits[t.Basic]
	_, u := uintBits[t.Basic]
	return i || u || t.Basic == "bool"
}

// matcher finds the live instances of one lock's key pattern: glob is the
// SCAN MATCH pattern, re checks a key exactly and captures its params.
type matcher struct {
	glob   string
	re     *regexp.Regexp
	params []string // the names of re's groups, in order
	types  map[string]lockgen.ParamType
	tag    string // the literal hash tag text, when the whole tag is literal
	lead   string // the pattern's leading literal text
}

// reservedPrefixes start the names of the runtime's own keys (owner
// labels, queues, grants: lockgen_*) and Redisson's helper keys
// (redisson_*), see docs/redisson.md. A pattern that begins with a
// placeholder may render such a name, but a key under one of them is
// not a lock's instance unless the pattern's own literal start says so.
var reservedPrefixes = []string{"lockgen_", "redisson_"}

// reserved reports whether key is a runtime or Redisson helper name the
// pattern does not spell out itself.
func (m *matcher) reserved(key string) bool {
	for _, p := range reservedPrefixes {
		if strings.HasPrefix(key, p) && !strings.HasPrefix(m.lead, p) {
			return true
		}
	}
	return false
}

// globEscaper escapes the characters SCAN's MATCH treats specially.
var globEscaper = strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`)

func newMatcher(l *lockgen.Lock) *matcher {
	types := map[string]lockgen.ParamType{}
	for _, p := range l.Params {
		types[p.Name] = p.Type
	}
	m := &matcher{types: types}
	var glob, re strings.Builder
	re.WriteString("^")
	seen := map[string]bool{}
	for i, s := range l.KeyPattern().Segments {
		if s.Param == "" {
			if i == 0 {
				m.lead = s.Lit
			}
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
			re.WriteString("(" + types[s.Param].KeyClass() + ")")
			m.params = append(m.params, s.Param)
			continue
		}
		seen[s.Param] = true
		re.WriteString("(" + types[s.Param].KeyClass() + ")")
		m.params = append(m.params, s.Param)
	}
	re.WriteString("$")
	m.glob = glob.String()
	m.re = regexp.MustCompile(re.String())
	m.tag = literalTag(l.KeyPattern())
	return m
}

// match reports whether key is an instance of the pattern that a
// generated helper could have made, with its params' values (as the
// application passed them: parseValue).
func (m *matcher) match(key string) (map[string]string, bool) {
	sub := m.re.FindStringSubmatch(key)
	if sub == nil || m.reserved(key) {
		return nil, false
	}
	params := map[string]string{}
	for i, name := range m.params {
		v, ok := parseValue(m.types[name], sub[i+1])
		if !ok {
			return nil, false
		}
		if seen, ok := params[name]; ok && seen != v {
			return nil, false
		}
		params[name] = v
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
