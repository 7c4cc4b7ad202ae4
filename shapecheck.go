package lockgen

import (
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// shapeError is one way a YAML value does not fit the schema.
type shapeError struct {
	at   Pos
	path string
	msg  string
}

// checkShape validates the document against the spec's schema and adds an
// error for every misfit at a field the parser has not already reported
// (its own messages are more precise). So whatever the schema rejects,
// Parse rejects too.
func (p *parser) checkShape(root *yaml.Node) {
	if at, why := unexpandable(root); why != "" {
		p.add(at, "", "%s", why)
		return
	}
	for _, se := range validateShape(specSchema, root, "") {
		if !p.under(se.path) {
			p.add(se.at, se.path, "%s", se.msg)
		}
	}
}

// maxExpanded bounds the nodes a document may stand for once its aliases
// are expanded: a few aliases of aliases can otherwise stand for billions.
const maxExpanded = 100_000

// unexpandable reports an alias that refers to a value containing itself,
// or aliases that expand past maxExpanded nodes: neither is data a schema
// (or lockgen) can read. It returns the alias's position and the message.
func unexpandable(root *yaml.Node) (Pos, string) {
	onPath := map[*yaml.Node]bool{}
	count := 0
	var at Pos
	var why string
	var walk func(n *yaml.Node) bool
	walk = func(n *yaml.Node) bool {
		if n.Kind == yaml.AliasNode {
			if n.Alias == nil || onPath[n.Alias] {
				at, why = pos(n), "the alias *"+n.Value+" refers to a value that contains it (write the value out instead)"
				return false
			}
			n = n.Alias
		}
		if count++; count > maxExpanded {
			at, why = pos(n), fmt.Sprintf("the aliases of this spec stand for more than %d values (write the values out instead)", maxExpanded)
			return false
		}
		onPath[n] = true
		defer delete(onPath, n)
		for _, c := range n.Content {
			if !walk(c) {
				return false
			}
		}
		return true
	}
	walk(root)
	return at, why
}

// validateShape returns every misfit of n against s; path is n's field.
func validateShape(s *schema, n *yaml.Node, path string) []shapeError {
	var out []shapeError
	report := func(at Pos, path, format string, args ...any) {
		out = append(out, shapeError{at, path, fmt.Sprintf(format, args...)})
	}
	check(s, deref(n), path, report)
	return out
}

type reportFunc func(at Pos, path, format string, args ...any)

// fits reports whether n is valid against s, reporting nothing.
func fits(s *schema, n *yaml.Node, path string) bool {
	ok := true
	check(s, n, path, func(Pos, string, string, ...any) { ok = false })
	return ok
}

// check validates n (dereferenced) against s, as a JSON Schema validator
// would validate the JSON value the YAML stands for.
func check(s *schema, n *yaml.Node, path string, report reportFunc) {
	if s.ref != "" {
		r := s.resolve()
		if s.want != "" {
			local := *r // the referring field's own words for messages
			local.want = s.want
			r = &local
		}
		check(r, n, path, report)
		return
	}
	at := pos(n)
	if s.never {
		report(at, path, "is not allowed here (remove it)")
		return
	}
	typ := jsonType(n)
	if len(s.types) > 0 && !typeOK(s.types, n, typ) {
		report(at, path, "must be %s, got %s%s%s", wantOf(s), describe(n), quoteFix(s.types, n), unquoteFix(s, n))
		return // the other keywords would only repeat it
	}
	if s.hasConst && !reflect.DeepEqual(jsonValue(n), normalize(s.constant)) {
		report(at, path, "must be %s, got %s%s", wantOf(s), describe(n), unquoteFix(s, n))
		return
	}
	if s.enum != nil && !inEnum(s.enum, n) {
		report(at, path, "%s is not %s", describe(n), wantOf(s))
		return
	}
	if typ == "string" {
		if s.pattern != "" && !compile(s.pattern).MatchString(n.Value) {
			report(at, path, "%q is not %s", n.Value, wantOf(s))
		}
		if s.minLength != nil && utf8.RuneCountInString(n.Value) < *s.minLength {
			report(at, path, "is empty (write %s)", wantOf(s))
		}
	}
	if s.minimum != nil && (typ == "integer" || typ == "number") {
		if v, _ := jsonValue(n).(float64); v < float64(*s.minimum) {
			report(at, path, "%s is below %d (write %s)", n.Value, *s.minimum, wantOf(s))
		}
	}
	if s.maximum != nil && (typ == "integer" || typ == "number") {
		if v, _ := jsonValue(n).(float64); v > float64(*s.maximum) {
			report(at, path, "%s is above %d (write %s)", n.Value, *s.maximum, wantOf(s))
		}
	}
	switch n.Kind {
	case yaml.SequenceNode:
		checkArray(s, n, path, report)
	case yaml.MappingNode:
		checkObject(s, n, path, report)
	}
	if s.anyOf != nil {
		matched := false
		for _, alt := range s.anyOf {
			if fits(alt, n, path) {
				matched = true
				break
			}
		}
		if !matched {
			report(at, path, "%s is not %s%s", describe(n), wantOf(s), unquoteFix(s, n))
		}
	}
	for _, sub := range s.allOf {
		if sub.ifS != nil && sub.want != "" {
			// A condition across fields: one message for the lock.
			if !fits(sub, n, path) {
				report(at, path, "%s", sub.want)
			}
			continue
		}
		check(sub, n, path, report)
	}
	if s.ifS != nil {
		branch := s.elseS
		if fits(s.ifS, n, path) {
			branch = s.thenS
		}
		if branch != nil {
			check(branch, n, path, report)
		}
	}
	if s.not != nil && fits(s.not, n, path) {
		report(at, path, "%s is not allowed here (write %s)", describe(n), wantOf(s))
	}
}

func checkArray(s *schema, n *yaml.Node, path string, report reportFunc) {
	if s.minItems != nil && len(n.Content) < *s.minItems {
		report(pos(n), path, "needs at least %d items, got %d (write %s)", *s.minItems, len(n.Content), wantOf(s))
	}
	var seen []any
	for _, item := range n.Content {
		item = deref(item)
		if s.items != nil {
			check(s.items, item, path, report)
		}
		if s.uniqueItems {
			v := jsonValue(item)
			for _, x := range seen {
				if reflect.DeepEqual(x, v) {
					report(pos(item), path, "%s is listed twice (remove one)", describe(item))
				}
			}
			seen = append(seen, v)
		}
	}
}

func checkObject(s *schema, n *yaml.Node, path string, report reportFunc) {
	present := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), deref(n.Content[i+1])
		name := k.Value
		if k.Tag == "!!merge" {
			continue // the parser refuses merge keys with their own error
		}
		present[name] = true
		sub := join(path, name)
		if s.propertyNames != nil {
			check(s.propertyNames, k, sub, report)
		}
		if ps := s.prop(name); ps != nil {
			check(ps, v, sub, report)
			continue
		}
		switch {
		case s.closed:
			report(pos(k), sub, "unknown field %q (%s)", name, didYouMean(name, s.propNames()))
		case s.additional != nil:
			check(s.additional, v, sub, report)
		}
	}
	for _, r := range s.required {
		if !present[r] {
			report(pos(n), join(path, r), "missing (add %s)", wantOf(s.prop(r)))
		}
	}
	if s.minProperties != nil && len(present) < *s.minProperties {
		report(pos(n), path, "is empty (declare at least %d)", *s.minProperties)
	}
}

// jsonType is the JSON type of the value n stands for.
func jsonType(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "object"
	case yaml.SequenceNode:
		return "array"
	}
	switch n.ShortTag() {
	case "!!null":
		return "null"
	case "!!bool":
		return "boolean"
	case "!!int":
		return "integer"
	case "!!float":
		if f, ok := jsonValue(n).(float64); ok && f == math.Trunc(f) && !math.IsInf(f, 0) {
			return "integer"
		}
		return "number"
	}
	return "string"
}

func typeOK(types []string, n *yaml.Node, typ string) bool {
	for _, t := range types {
		if t == typ || t == "number" && typ == "integer" {
			return true
		}
	}
	return false
}

// jsonValue is the value n stands for, numbers as float64, for comparisons.
func jsonValue(n *yaml.Node) any {
	n = deref(n)
	switch n.Kind {
	case yaml.MappingNode:
		m := map[string]any{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			m[deref(n.Content[i]).Value] = jsonValue(n.Content[i+1])
		}
		return m
	case yaml.SequenceNode:
		list := make([]any, len(n.Content))
		for i, c := range n.Content {
			list[i] = jsonValue(c)
		}
		return list
	}
	var v any
	if err := n.Decode(&v); err != nil {
		return n.Value
	}
	return normalize(v)
}

// normalize makes every number a float64 and anything that is not a JSON
// value (a YAML timestamp) its text.
func normalize(v any) any {
	switch x := v.(type) {
	case int:
		return float64(x)
	case int64:
		return float64(x)
	case uint64:
		return float64(x)
	case float64, string, bool, nil:
		return x
	}
	return fmt.Sprint(v)
}

func inEnum(enum []any, n *yaml.Node) bool {
	v := jsonValue(n)
	for _, e := range enum {
		if reflect.DeepEqual(v, normalize(e)) {
			return true
		}
	}
	return false
}

// describe is the value n for a message: the string "1", the number 123.
func describe(n *yaml.Node) string {
	switch jsonType(n) {
	case "object":
		return "a mapping"
	case "array":
		return "a list"
	case "null":
		return "nothing"
	case "boolean":
		return n.Value
	case "integer", "number":
		return "the number " + n.Value
	}
	return "the string " + strconv.Quote(n.Value)
}

// wantOf says what s accepts.
func wantOf(s *schema) string {
	if s == nil {
		return "it"
	}
	if s.want != "" {
		return s.want
	}
	if s.ref != "" {
		return wantOf(s.resolve())
	}
	switch {
	case s.hasConst:
		return fmt.Sprint(s.constant)
	case len(s.types) == 1 && s.types[0] == "string":
		return "a string"
	case len(s.types) == 1 && s.types[0] == "object":
		return "a mapping"
	}
	return "a value of type " + strings.Join(s.types, " or ")
}

// quoteFix suggests quotes for a number or boolean where text is wanted.
func quoteFix(types []string, n *yaml.Node) string {
	if len(types) == 1 && types[0] == "string" && n.Kind == yaml.ScalarNode && n.ShortTag() != "!!null" {
		return fmt.Sprintf(" (quote it: %q)", n.Value)
	}
	return ""
}

// unquoteFix suggests removing the quotes of a quoted value that would
// fit s without them ("1" where the number 1 is wanted).
func unquoteFix(s *schema, n *yaml.Node) string {
	if n.Kind != yaml.ScalarNode || n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) == 0 {
		return ""
	}
	var doc yaml.Node
	if yaml.Unmarshal([]byte(n.Value), &doc) != nil || len(doc.Content) != 1 {
		return ""
	}
	plain := doc.Content[0]
	if plain.Kind != yaml.ScalarNode || plain.ShortTag() == "!!str" || !fits(s, plain, "") {
		return ""
	}
	return " (remove the quotes: " + n.Value + ")"
}

var patterns sync.Map // pattern -> *regexp.Regexp

func compile(p string) *regexp.Regexp {
	if re, ok := patterns.Load(p); ok {
		return re.(*regexp.Regexp)
	}
	re := regexp.MustCompile(p)
	patterns.Store(p, re)
	return re
}
