package lockgen

import (
	"bytes"
	"errors"
	"go/build"
	"io"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Field names of locks.yaml, in documentation order: the public contract
// of the DSL.
// They are read from the spec's schema (shape.go), the one place that
// declares them.
var (
	topFields      = specSchema.propNames()
	defaultsFields = specSchema.prop("defaults").propNames()
	lockFields     = def("lock").propNames()
	fairnessFields = def("lock").prop("fairness").propNames()
	writerOrders   = []string{writersRedisson, writersFirst}
)

// Parse reads and validates a spec. filename is only used in error
// messages. Param types are checked for syntax here; whether a user type
// exists and can be a key is checked by Render, which loads Go packages.
//
// The error, when not nil, is an ErrorList holding every problem found.
func Parse(filename string, src []byte) (spec *Spec, err error) {
	p := &parser{errs: errs{file: filename}, src: src}
	root, ok := p.document(src)
	if !ok {
		return nil, p.err()
	}
	p.misindented(root)
	s := p.spec(root)
	validate(s, &p.errs)
	p.checkShape(root)
	if err := p.err(); err != nil {
		return nil, err
	}
	s.File = filename
	s.schemaRef, s.schemaPos = modeline(src)
	return s, nil
}

type parser struct {
	errs
	src           []byte // the spec's text, to map pattern offsets to columns
	locksReported bool   // the locks mapping held only misplaced fields, reported
}

// document parses the YAML and returns the root mapping.
func (p *parser) document(src []byte) (root *yaml.Node, ok bool) {
	var doc yaml.Node
	next, err := safeDecode(src, &doc)
	if err != nil {
		at := syntaxPos(err)
		if col := tabIndent(src, at.Line); col > 0 {
			p.add(Pos{at.Line, col}, "", "tabs are not allowed in YAML indentation; use spaces (replace the tab at the start of this line with spaces)")
			return nil, false
		}
		p.add(at, "", "invalid YAML: %s (fix the syntax at this line)", syntaxMsg(err))
		return nil, false
	}
	if next != nil {
		if doc.Kind == 0 || len(doc.Content) == 0 || deref(doc.Content[0]).Tag == "!!null" {
			p.add(Pos{next.Line, next.Column}, "", "a second YAML document starts here, after an empty one: a spec is one document (remove this ---)")
			return nil, false
		}
		p.add(Pos{next.Line, next.Column}, "", "a second YAML document starts here, which lockgen would ignore: a spec is one document (remove this --- and what follows it, or move that into a spec of its own)")
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		p.add(Pos{1, 1}, "", "the spec is empty (start from `lockgen init`, or write version: 1, package: and locks:)")
		return nil, false
	}
	root = deref(doc.Content[0])
	if root.Kind != yaml.MappingNode {
		p.add(pos(root), "", "the spec must be a mapping with version, package and locks (got %s)", kindName(root))
		return nil, false
	}
	return root, true
}

// safeDecode reads the first YAML document of src into n, and returns the
// document node of a second one (next: its --- line), which a spec may not
// have. It turns a panic in the YAML library into an error: bad input must
// never crash the generator.
func safeDecode(src []byte, n *yaml.Node) (next *yaml.Node, err error) {
	defer func() {
		if r := recover(); r != nil {
			next, err = nil, &yaml.TypeError{Errors: []string{"yaml: cannot parse document"}}
		}
	}()
	d := yaml.NewDecoder(bytes.NewReader(src))
	if err := d.Decode(n); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, err
	}
	var second yaml.Node
	switch err := d.Decode(&second); {
	case errors.Is(err, io.EOF):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return &second, nil
}

var lineRE = regexp.MustCompile(`line (\d+)(?::(\d+))?`)

func syntaxPos(err error) Pos {
	m := lineRE.FindStringSubmatch(err.Error())
	if m == nil {
		return Pos{1, 1}
	}
	line, _ := strconv.Atoi(m[1])
	col := 1
	if m[2] != "" {
		col, _ = strconv.Atoi(m[2])
	}
	return Pos{line, col}
}

// tabIndent returns the 1-based column of the first tab in the
// indentation of line (1-based) of src, or 0 when there is none.
func tabIndent(src []byte, line int) int {
	lines := strings.Split(string(src), "\n")
	if line < 1 || line > len(lines) {
		return 0
	}
	for i, c := range lines[line-1] {
		switch c {
		case '\t':
			return i + 1
		case ' ':
		default:
			return 0
		}
	}
	return 0
}

func syntaxMsg(err error) string {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "yaml: ")
	msg = lineRE.ReplaceAllString(msg, "")
	msg = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(msg), ":"))
	msg = strings.Join(strings.Fields(msg), " ")
	if msg == "" {
		msg = "cannot parse"
	}
	return msg
}

func pos(n *yaml.Node) Pos { return Pos{n.Line, n.Column} }

// deref follows YAML aliases (*name) to the anchored node.
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < 100; i++ {
		n = n.Alias
	}
	return n
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "nothing"
		}
		return strconv.Quote(n.Value)
	}
	return "an alias"
}

// field is one key/value pair of a mapping.
type field struct {
	name string
	key  *yaml.Node
	val  *yaml.Node
}

// fields returns the pairs of mapping n, reporting unknown and duplicate
// keys (with a suggestion) and keeping the known ones in order. known nil
// accepts any key that is a scalar (used for locks and params).
func (p *parser) fields(n *yaml.Node, path string, known []string) []field {
	n = deref(n)
	if n.Kind != yaml.MappingNode {
		p.add(pos(n), path, "must be a mapping, got %s (write name: value lines, or {name: value, ...})", kindName(n))
		return nil
	}
	var out []field
	seen := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), deref(n.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			p.add(pos(k), path, "keys must be plain names, got %s", kindName(k))
			continue
		}
		sub := join(path, k.Value)
		if k.Value == "<<" {
			p.add(pos(k), path, "YAML merge keys (<<) are not supported (write the fields out)")
			continue
		}
		if first, dup := seen[k.Value]; dup {
			p.add(pos(k), sub, "duplicate key %q (first at line %d:%d; remove one)", k.Value, first.Line, first.Column)
			continue
		}
		seen[k.Value] = k
		if known != nil && !contains(known, k.Value) {
			p.add(pos(k), sub, "unknown field %q (%s)", k.Value, didYouMean(k.Value, known))
			continue
		}
		out = append(out, field{k.Value, k, v})
	}
	return out
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// spec walks the root mapping.
func (p *parser) spec(root *yaml.Node) *Spec {
	s := &Spec{
		Output:   DefaultOutput,
		Defaults: Defaults{Lease: Lease{Watchdog: true}, WaitTime: Wait{D: DefaultWaitTime}},
	}
	got := map[string]bool{}
	var locks *yaml.Node
	for _, f := range p.fields(root, "", topFields) {
		got[f.name] = true
		switch f.name {
		case "version":
			p.version(s, f)
		case "package":
			p.pkg(s, f)
		case "output":
			p.output(s, f)
		case "defaults":
			for _, d := range p.fields(f.val, "defaults", defaultsFields) {
				switch d.name {
				case "lease":
					if l, ok := p.lease(d.val, "defaults.lease"); ok {
						s.Defaults.Lease = l
					}
				case "waitTime":
					if w, ok := p.wait(d.val, "defaults.waitTime"); ok {
						s.Defaults.WaitTime = w
					}
				case "syncReplicas":
					if n, ok := p.replicas(d.val, "defaults.syncReplicas"); ok {
						s.Defaults.SyncReplicas = n
					}
				}
			}
		case "locks":
			locks = f.val
		}
	}
	first := Pos{1, 1}
	if len(root.Content) > 0 {
		first = pos(root.Content[0])
	}
	s.firstPos = first
	if !got["version"] {
		p.add(first, "version", "missing (add version: 1 at the top)")
	}
	if !got["package"] {
		p.add(first, "package", "missing (add the Go package name of the generated file, e.g. package: locks)")
	}
	if !got["locks"] {
		p.add(first, "locks", "missing (declare at least one lock under locks:)")
		return s
	}
	if locks != nil {
		p.locks(s, locks)
	}
	return s
}

func (p *parser) version(s *Spec, f field) {
	v := deref(f.val)
	switch t := jsonType(v); t {
	case "integer", "number":
		if n, _ := jsonValue(v).(float64); n != 1 {
			p.add(pos(v), "version", "version %s is not supported (this lockgen reads version: 1)", v.Value)
			return
		}
		s.Version = 1
	case "string":
		fix := "write version: 1"
		if v.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 {
			fix = "remove the quotes: version: 1"
		}
		p.add(pos(v), "version", "must be the number 1, got %s (%s)", describe(v), fix)
	default:
		p.add(pos(v), "version", "must be the number 1, got %s (write version: 1)", describe(v))
	}
}

func (p *parser) pkg(s *Spec, f field) {
	v, ok := p.scalar(f.val, "package", "the Go package name, e.g. package: locks")
	if !ok {
		return
	}
	if isKeyword(v) {
		p.add(pos(deref(f.val)), "package", "%q is a Go keyword, which cannot name a package (use another name, e.g. locks)", v)
		return
	}
	if !isIdent(v) || v == "_" {
		p.add(pos(deref(f.val)), "package", "%q is not a Go package name (use a lower-case identifier such as %s)", v, strings.ToLower(camel(v)))
		return
	}
	if v == "documentation" {
		// go/build skips every file of package documentation.
		p.add(pos(deref(f.val)), "package", "%q is a name the go tool ignores: it leaves files of package documentation out of every build (use another name, e.g. locks)", v)
		return
	}
	s.Package = v
	s.packagePos = pos(deref(f.val))
}

func (p *parser) output(s *Spec, f field) {
	v, ok := p.scalar(f.val, "output", "a path relative to the spec, e.g. output: locks/locks_gen.go")
	if !ok {
		return
	}
	at := pos(deref(f.val))
	switch {
	case !strings.HasSuffix(v, ".go") || strings.HasSuffix(v, "_test.go"):
		p.add(at, "output", "%q is not a Go file name (end it in .go, not _test.go, e.g. locks_gen.go)", v)
	case strings.HasPrefix(v, "/") || filepath.VolumeName(v) != "" || len(v) > 1 && v[1] == ':':
		p.add(at, "output", "%q is an absolute path: output is relative to the spec's directory and stays inside its module (write e.g. %s, or gen/%s)", v, DefaultOutput, DefaultOutput)
	case strings.Contains(v, "\\") || strings.ContainsRune(v, 0):
		p.add(at, "output", "%q must be a relative path with / separators (it is relative to the spec's directory)", v)
	case ignoredName(path.Base(v)) != "":
		p.add(at, "output", "%q is a file the go tool leaves out of its package: %s (name it e.g. %s)", v, ignoredName(path.Base(v)), path.Join(path.Dir(v), DefaultOutput))
	default:
		s.Output = v
		s.outputPos = at
	}
}

// ignoredName says why the go tool leaves a .go file named name out of
// its package, by go/build's rules, or "" when it builds it everywhere.
func ignoredName(name string) string {
	if strings.HasPrefix(name, "_") || strings.HasPrefix(name, ".") {
		return "it ignores names starting with _ or ."
	}
	// A _GOOS or _GOARCH suffix fails one of two targets that share
	// neither; the file's own build tags are not read (it is generated).
	for _, target := range [][2]string{{"linux", "amd64"}, {"windows", "arm64"}} {
		ctxt := build.Default
		ctxt.GOOS, ctxt.GOARCH = target[0], target[1]
		ctxt.OpenFile = func(string) (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("package p\n")), nil }
		if ok, err := ctxt.MatchFile(".", name); err == nil && !ok {
			return "a _GOOS or _GOARCH suffix builds it only for that target"
		}
	}
	return ""
}

// scalar returns the text of a scalar node, reporting anything else as an
// error that shows what to write instead.
func (p *parser) scalar(n *yaml.Node, path, want string) (string, bool) {
	n = deref(n)
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		p.add(pos(n), path, "must be a single value, got %s (write %s)", kindName(n), want)
		return "", false
	}
	return n.Value, true
}
