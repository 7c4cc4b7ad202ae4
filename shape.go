package lockgen

import (
	"bytes"
	"encoding/json"
	"go/token"
	"regexp"
	"sort"
	"strings"
)

// The shape of locks.yaml is written once, here, as a JSON Schema in Go.
// locks.schema.json (Schema) is this tree marshalled, and Parse checks every
// spec against the same tree (shapecheck.go) besides its own checks, so a
// spec the schema rejects can never pass lockgen. The rules that need more
// than the shape of one file (placeholders against params, members against
// locks, Go types) are the parser's alone; TestSchemaAndParserAgree lists
// them. The field lists the parser walks are read from the tree.

// schema is one JSON Schema (2020-12) node. Only the keywords lockgen
// needs exist; want is not part of the schema: it is how messages describe
// a valid value.
type schema struct {
	ref           string
	desc          string
	types         []string
	hasConst      bool
	constant      any
	enum          []any
	pattern       string
	minLength     *int
	minimum       *int
	maximum       *int
	minItems      *int
	uniqueItems   bool
	items         *schema
	minProperties *int
	propertyNames *schema
	required      []string
	props         []prop
	closed        bool    // additionalProperties: false
	additional    *schema // additionalProperties: a schema
	anyOf, allOf  []*schema
	ifS, thenS    *schema
	elseS         *schema
	not           *schema
	never         bool // the schema false: nothing is valid
	examples      []any

	want string // e.g. "a duration such as 10s": for messages, not marshalled
}

type prop struct {
	name string
	s    *schema
}

func intp(n int) *int { return &n }

// prop returns the schema of property name, or nil.
func (s *schema) prop(name string) *schema {
	for _, p := range s.props {
		if p.name == name {
			return p.s
		}
	}
	return nil
}

// propNames lists the properties in documentation order.
func (s *schema) propNames() []string {
	names := make([]string, len(s.props))
	for i, p := range s.props {
		names[i] = p.name
	}
	return names
}

// The JSON Schema's identity. A file with this $id is lockgen's schema, so
// lockgen may replace it with its own version.
const (
	schemaDialect = "https://json-schema.org/draft/2020-12/schema"
	schemaTitle   = "lockgen locks.yaml"
)

// durationPattern is what the schema accepts as a duration: a Go duration
// without a sign (time.ParseDuration accepts a subset of these too, and
// the parser uses it after this check).
const durationPattern = `^([0-9]+(\.[0-9]*)?(ns|us|µs|μs|ms|s|m|h))+$`

// Identifier patterns, as Go defines them: a letter or _, then letters,
// digits and _; exported when the first is an upper-case letter.
const (
	identPattern    = `^[\p{L}_][\p{L}\p{Nd}_]*$`
	exportedPattern = `^\p{Lu}[\p{L}\p{Nd}_]*$`
)

// paramTypePattern accepts the Go basic types that can be key params, and
// import/path.Type user types.
func paramTypePattern() string {
	names := append([]string{}, basicNames...)
	sort.Strings(names)
	return `^(` + strings.Join(names, "|") + `|[^\s.][^\s]*\.\p{Lu}[\p{L}\p{Nd}_]*)$`
}

// goKeywords are Go's keywords, which look like identifiers but name nothing.
func goKeywords() []any {
	var out []any
	for t := token.BREAK; t <= token.VAR; t++ {
		if t.IsKeyword() {
			out = append(out, t.String())
		}
	}
	return out
}

func strs(list ...string) []any {
	out := make([]any, len(list))
	for i, s := range list {
		out[i] = s
	}
	return out
}

// specSchema is the spec's shape; defs holds the named sub-schemas.
var specSchema, schemaDefs = buildSchema()

func buildSchema() (*schema, []prop) {
	str := []string{"string"}
	duration := &schema{
		desc:    "A Go duration such as 500ms, 10s or 1m30s.",
		types:   str,
		pattern: durationPattern,
		want:    "a duration such as 10s, 1m or 1m30s",
	}
	lease := &schema{
		desc: "watchdog: renewed while held, every third of the client's Options.WatchdogTimeout (30s by default), so a crashed holder's lock expires after that timeout; " +
			"or a fixed duration of at least 10ms after which the key expires and is never renewed (the holder's ctx ends just before). Default: watchdog.",
		anyOf: []*schema{{hasConst: true, constant: "watchdog"}, {ref: "#/$defs/duration"}},
		want:  "watchdog, or a duration such as 30s",
	}
	wait := &schema{
		desc:  "How long With<Name> waits for the lock: a duration, 0 to try once, or forever to wait until the ctx is done. Default: 5s.",
		anyOf: []*schema{{hasConst: true, constant: "forever"}, {hasConst: true, constant: 0}, {hasConst: true, constant: "0"}, {ref: "#/$defs/duration"}},
		want:  "forever, 0 or a duration such as 5s",
	}
	replicas := &schema{
		desc: "How many replicas must acknowledge each acquisition (Redis WAIT, up to the client's Options.ReplicaTimeout, 1s by default); with fewer it is undone and fails with runtime.ErrNotReplicated. " +
			"0 waits for none; at most 2147483647 (2^31-1). Becomes LockOptions.SyncReplicas. Needs the client to be a *redis.Client or *redis.ClusterClient.",
		types:   []string{"integer"},
		minimum: intp(0),
		maximum: intp(maxNumber),
		want:    "a number of replicas such as 1",
	}
	pattern := &schema{
		desc:      "Literal text with ${param} placeholders.",
		types:     str,
		minLength: intp(1),
		want:      `a pattern such as "order:${orderID}"`,
	}
	reservedAndKeywords := append(append(strs(reservedParams...), goKeywords()...), strs(predeclared()...)...)
	lock := &schema{
		desc: "One lock. Its name is an exported Go identifier and names the generated methods <Name> (the handle) and With<Name> (With<Name>Read and With<Name>Write for readwrite; " +
			"Arm<Name>, Await<Name> and CountDown<Name> for a latch), and the unexported helpers <name>Key and <name>Options: two names whose first letters lower alike " +
			"(K and the KELVIN SIGN U+212A) are refused.",
		types:  []string{"object"},
		closed: true,
		props: []prop{
			{"doc", &schema{desc: "Why the lock exists: copied into the generated doc comments.", types: str, want: "one line, or a | block of text"}},
			{"kind", &schema{
				desc: "reentrant (default): one owner at a time, who may re-enter. fair: granted in arrival order. readwrite: many readers or one writer. " +
					"multi: its members, all or nothing. red: RedLock over the client's Options.RedLockNodes. " +
					"semaphore: at most permits holders at once, each permit with its own lease (Redisson RPermitExpirableSemaphore). " +
					"latch: waiters go on once count parties have counted down (Redisson RCountDownLatch).",
				enum: strs(kindNames()...),
				want: "one of " + strings.Join(kindNames(), ", "),
			}},
			{"key", &schema{
				desc: "The Redis key pattern, e.g. order:${orderID}. Every ${param} is declared under params and every param is used; two placeholders may not touch (${a}${b} could collide). " +
					"Literal {...} is a Redis hash tag: balanced, not nested, not empty. String values are escaped (% { } as %25 %7B %7D), so no value can move a key to another cluster slot. " +
					"No two locks may be able to render the same key: order:${id} beside order:${name} (a string renders any number) is refused, beside invoice:${id} it is not.",
				ref: "#/$defs/pattern",
			}},
			{"params", &schema{
				desc: "The key's params, in the order of the generated functions' parameters: name -> Go type. Basic types: string, bool, int, int8..int64, uint, uint8..uint64, byte, rune " +
					"(floats are refused: 1 and 1.0 would be two keys). User types: import/path.Type, resolved with go/packages from the spec's directory, with a string, integer or bool " +
					"underlying type, or a String() string or MarshalText() ([]byte, error) method (result names do not matter); interface and pointer types are refused (a nil value has no text, or panics in the key function), " +
					"and so is a type whose String or MarshalText comes from an embedded interface or through an embedded pointer; " +
					"time.Time is refused, also under an alias or embedded so that its String or MarshalText is promoted (equal instants render different text: String() adds " +
					"the zone and the monotonic clock reading, MarshalText() the zone offset), pass t.UTC().Unix() as an int64 or a string formatted in UTC. " +
					"The type's package must be one the output package can import: not a package main, not internal to another tree, not importing the output package. " +
					"Names the generated code uses (" + strings.Join(reservedParams, ", ") + "), Go keywords, Go's predeclared identifiers (bool, int64, string, nil, false, len, ...) and _ are refused.",
				types: []string{"object", "null"},
				want:  "a mapping of name: Go type, such as {orderID: int64}",
				propertyNames: &schema{
					pattern: identPattern,
					not:     &schema{enum: reservedAndKeywords},
					want:    "a Go identifier such as orderID, not a keyword, a predeclared identifier, _ nor a name the generated code uses",
				},
				additional: &schema{types: str, pattern: paramTypePattern(), want: "a Go basic type such as int64 or string, or import/path.Type"},
			}},
			{"lease", &schema{ref: "#/$defs/lease"}},
			{"waitTime", &schema{ref: "#/$defs/waitTime"}},
			{"syncReplicas", &schema{
				desc: "reentrant, fair and readwrite locks: replicas that must acknowledge each acquisition; overrides defaults.syncReplicas. " +
					"Not for multi locks (each member waits with its own) nor red locks (each RedLock node is an independent master: the quorum is what survives a crash).",
				ref: "#/$defs/syncReplicas",
			}},
			{"fairness", &schema{
				desc:   "fair and readwrite locks only: queueTimeout for fair, writers for readwrite.",
				types:  []string{"object"},
				closed: true,
				props: []prop{
					{"queueTimeout", &schema{
						desc: "fair locks only: how long a queued waiter may go silent before the others skip it. A live waiter refreshes its place every queueTimeout/3, " +
							"so it keeps it however long the holders ahead take; a waiter whose process died is skipped queueTimeout after its last refresh, so shorter means a crashed waiter " +
							"holds up the queue for less time. At least 10ms (the runtime's minimum). Default: 5m. Becomes LockOptions.QueueTimeout.",
						ref: "#/$defs/duration",
					}},
					{"writers", &schema{
						desc: "readwrite locks only. redisson (default): readers join a read-held lock whenever they come, as in Redisson, so a steady stream of readers can starve a writer. " +
							"first: a waiting writer holds back new readers, so it waits about one reader hold time; becomes LockOptions.WritersFirst.",
						enum: strs(writerOrders...),
						want: "first, or redisson (the default)",
					}},
				},
			}},
			{"members", &schema{
				desc: "multi locks only: at least two lock names, taken together, all or nothing. A reentrant or fair member is taken as it is, a readwrite member on its write side, " +
					"and a multi member is flattened into its own members (a lock reached twice is taken once); red locks cannot be members (they live on other servers), nor can semaphores (shared holders), latches (awaited, not held) " +
					"or fenced locks (a multi lock would take them without a token). " +
					"Unknown names, duplicates, the lock itself, cycles and a shared param with two types are errors. The multi lock's own lease and waitTime (or the defaults) " +
					"apply to the whole, the members' do not. Its params are the union of the members', in member order.",
				types:       []string{"array"},
				minItems:    intp(2),
				uniqueItems: true,
				items:       &schema{types: str, pattern: exportedPattern, want: "a lock name such as OrderLock"},
				want:        "a list of lock names such as [OrderLock, InventoryLock]",
			}},
			{"atomic", &schema{
				desc: "multi locks only: true promises that one script call takes every member (one round trip, atomic), and lockgen proves it: every member (after flattening) is reentrant " +
					"and every member's key hashes to the same cluster slot (the same hash tag over the same params, the same literal tag, or the same whole key); otherwise it is an error " +
					"at the member, with the fix. Without it (default false) the members are taken one by one in key order and released again if one cannot be had " +
					"(the runtime still uses one script call when it finds them all reentrant in one slot).",
				types: []string{"boolean"},
				want:  "true or false",
			}},
			{"quorum", &schema{
				desc: "red locks only: how many of the client's Options.RedLockNodes must grant the lock: majority (default) or a number of nodes, 1 to 2147483647 (2^31-1); becomes LockOptions.Quorum (0 for majority). " +
					"A quorum larger than the number of nodes, or not a majority of them, is refused by the runtime, which is the first to know the nodes.",
				anyOf: []*schema{{hasConst: true, constant: "majority"}, {types: []string{"integer"}, minimum: intp(1), maximum: intp(maxNumber)}},
				want:  "majority, or a number of nodes such as 3",
			}},
			{"fenced", &schema{
				desc: "reentrant locks only: true gives fn (and the handle's LockFenced) a fencing token, a number that grows with every acquisition of the lock, re-entries included " +
					"(Redisson RFencedLock: the counter redisson_lock_token:{<key>}, incremented by the acquire script itself). Send it with every write to the storage the lock guards, " +
					"and have the storage refuse a token lower than the highest it has seen: that is what keeps a holder paused past its lease from writing after the next holder. " +
					"Refused on fair, readwrite, red, multi, semaphore and latch, each with the reason.",
				types: []string{"boolean"},
				want:  "true or false",
			}},
			{"permits", &schema{
				desc: "semaphores only (required): how many holders the semaphore admits at once, 1 to 2147483647 (2^31-1, the largest int on every target). The count a fresh semaphore starts with: an acquire that finds no count " +
					"sets it (minus the permits held), once; SetPermits and AddPermits on the handle change it later. Becomes SemaphoreOptions.Permits.",
				types:   []string{"integer"},
				minimum: intp(1),
				maximum: intp(maxNumber),
				want:    "a number of permits such as 10",
			}},
			{"count", &schema{
				desc: "latches only (required): how many CountDown<Name> calls release the waiters, 1 to 2147483647 (2^31-1). Arm<Name> sets it, only when the latch is not armed; " +
					"a latch that reached zero is deleted and is never armed again but by Arm<Name>. Becomes LatchOptions.Count.",
				types:   []string{"integer"},
				minimum: intp(1),
				maximum: intp(maxNumber),
				want:    "a count such as 3",
			}},
			{"slot", &schema{
				desc: "A hash-tag pattern such as ${tenant}: the first occurrence of its text in the key is wrapped in braces (report:${tenant}:${month} -> report:{<tenant>}:<month>), " +
					"or {<slot>}: is put in front; locks with equal slot values share a cluster slot. Not with a literal hash tag in the key.",
				ref:  "#/$defs/pattern",
				want: `a pattern such as "${tenant}"`,
			}},
		},
	}
	lock.allOf = kindConditions()
	root := &schema{
		desc:     "Distributed locks on Redis, declared once; lockgen generates type-safe Go helpers for them. Reference: https://github.com/lockgen/lockgen/blob/main/docs/spec.md",
		types:    []string{"object"},
		closed:   true,
		required: []string{"version", "package", "locks"},
		props: []prop{
			{"version", &schema{desc: "The version of the spec format: 1.", hasConst: true, constant: 1, want: "the number 1 (version: 1)"}},
			{"package", &schema{
				desc:    "The Go package name of the generated file. It must match the other Go files in the output directory. Not a Go keyword, nor documentation (the go tool ignores that package's files).",
				types:   str,
				pattern: identPattern,
				not:     &schema{enum: append(goKeywords(), "documentation")},
				want:    "a Go package name such as locks",
			}},
			{"output", &schema{
				desc: "The generated Go file, relative to this spec; default locks_gen.go. It stays inside the spec's module, and lockgen only ever replaces a file it generated " +
					"(one that starts with // Code generated by lockgen. DO NOT EDIT.) from this spec: a file generated from another spec is refused, so two specs cannot overwrite each other's output. " +
					"A name the go tool leaves out of the package is refused: one starting with _ or ., and one with a _GOOS or _GOARCH suffix (locks_windows.go). " +
					"So is a directory the go command cannot import: not a valid import path element (a space, non-ASCII letters, @), or under a vendor directory.",
				types:   str,
				pattern: `^[^/\\:\x00][^\\:\x00]*\.go$`,
				not:     &schema{pattern: `_test\.go$|(^|/)[_.][^/]*$`},
				want:    "a relative path to a .go file such as locks_gen.go, its name not starting with _ or .",
			}},
			{"defaults", &schema{
				desc:   "Values for every lock that does not set the field itself.",
				types:  []string{"object"},
				closed: true,
				props: []prop{
					{"lease", &schema{ref: "#/$defs/lease"}},
					{"waitTime", &schema{ref: "#/$defs/waitTime"}},
					{"syncReplicas", &schema{
						desc: "Replicas that must acknowledge each acquisition of every reentrant, fair and readwrite lock that does not set its own. Default: 0.",
						ref:  "#/$defs/syncReplicas",
					}},
				},
			}},
			{"locks", &schema{
				desc:          "The locks, by exported Go name.",
				types:         []string{"object"},
				minProperties: intp(1),
				propertyNames: &schema{pattern: exportedPattern, want: "an exported Go name such as OrderLock"},
				additional:    &schema{ref: "#/$defs/lock"},
			}},
		},
	}
	defs := []prop{
		{"duration", duration},
		{"lease", lease},
		{"waitTime", wait},
		{"syncReplicas", replicas},
		{"pattern", pattern},
		{"lock", lock},
	}
	return root, defs
}

func kindNames() []string {
	names := make([]string, len(Kinds))
	for i, k := range Kinds {
		names[i] = string(k)
	}
	return names
}

// def returns the named definition.
func def(name string) *schema {
	for _, d := range schemaDefs {
		if d.name == name {
			return d.s
		}
	}
	return nil
}

// resolve follows s's $ref.
func (s *schema) resolve() *schema {
	for i := 0; s.ref != "" && i < 10; i++ {
		d := def(strings.TrimPrefix(s.ref, "#/$defs/"))
		if d == nil {
			break
		}
		s = d
	}
	return s
}

// Schema is the JSON Schema of locks.yaml, for editor completion and
// checks (see lockgen init, lockgen schema -o). It is generated from the
// shape Parse checks, so a spec it rejects never passes lockgen; the file
// locks.schema.json at the repository's root is this, kept equal by a test.
var Schema = marshalSchema()

func marshalSchema() []byte {
	var b bytes.Buffer
	writeSchema(&b, specSchema, true)
	var out bytes.Buffer
	if err := json.Indent(&out, b.Bytes(), "", "  "); err != nil {
		panic("lockgen: the schema does not marshal: " + err.Error())
	}
	out.WriteByte('\n')
	return compactArrays(out.Bytes())
}

// scalarArray matches an indented JSON array of strings, numbers and
// booleans, one per line.
var scalarArray = regexp.MustCompile(`\[\n(?:[ ]+(?:"(?:[^"\\\n]|\\.)*"|-?[0-9.]+|true|false|null),?\n)+[ ]*\]`)

// compactArrays puts each array of scalars on one line, as a person would
// write it.
func compactArrays(src []byte) []byte {
	return scalarArray.ReplaceAllFunc(src, func(m []byte) []byte {
		lines := strings.Split(string(m[2:len(m)-1]), "\n")
		var items []string
		for _, l := range lines {
			if l = strings.TrimSpace(l); l != "" {
				items = append(items, strings.TrimSuffix(l, ","))
			}
		}
		return []byte("[" + strings.Join(items, ", ") + "]")
	})
}

// writeSchema writes s as JSON with its keywords in a fixed, readable order.
func writeSchema(b *bytes.Buffer, s *schema, root bool) {
	if s.never {
		b.WriteString("false")
		return
	}
	n := 0
	key := func(k string) {
		if n > 0 {
			b.WriteByte(',')
		}
		n++
		lit(b, k)
		b.WriteByte(':')
	}
	val := func(k string, v any) {
		key(k)
		lit(b, v)
	}
	sub := func(k string, s *schema) {
		key(k)
		writeSchema(b, s, false)
	}
	subs := func(k string, list []*schema) {
		key(k)
		b.WriteByte('[')
		for i, s := range list {
			if i > 0 {
				b.WriteByte(',')
			}
			writeSchema(b, s, false)
		}
		b.WriteByte(']')
	}
	props := func(k string, list []prop) {
		key(k)
		b.WriteByte('{')
		for i, p := range list {
			if i > 0 {
				b.WriteByte(',')
			}
			lit(b, p.name)
			b.WriteByte(':')
			writeSchema(b, p.s, false)
		}
		b.WriteByte('}')
	}
	b.WriteByte('{')
	if root {
		val("$schema", schemaDialect)
		val("$id", schemaID)
		val("title", schemaTitle)
	}
	if s.ref != "" {
		val("$ref", s.ref)
	}
	if s.desc != "" {
		val("description", s.desc)
	}
	switch len(s.types) {
	case 0:
	case 1:
		val("type", s.types[0])
	default:
		val("type", s.types)
	}
	if s.hasConst {
		val("const", s.constant)
	}
	if s.enum != nil {
		val("enum", s.enum)
	}
	if s.pattern != "" {
		val("pattern", s.pattern)
	}
	if s.minLength != nil {
		val("minLength", *s.minLength)
	}
	if s.minimum != nil {
		val("minimum", *s.minimum)
	}
	if s.maximum != nil {
		val("maximum", *s.maximum)
	}
	if s.minItems != nil {
		val("minItems", *s.minItems)
	}
	if s.uniqueItems {
		val("uniqueItems", true)
	}
	if s.items != nil {
		sub("items", s.items)
	}
	if s.minProperties != nil {
		val("minProperties", *s.minProperties)
	}
	if s.propertyNames != nil {
		sub("propertyNames", s.propertyNames)
	}
	if s.required != nil {
		val("required", s.required)
	}
	if s.props != nil {
		props("properties", s.props)
	}
	if s.closed {
		val("additionalProperties", false)
	}
	if s.additional != nil {
		sub("additionalProperties", s.additional)
	}
	if s.anyOf != nil {
		subs("anyOf", s.anyOf)
	}
	if s.allOf != nil {
		subs("allOf", s.allOf)
	}
	if s.ifS != nil {
		sub("if", s.ifS)
	}
	if s.thenS != nil {
		sub("then", s.thenS)
	}
	if s.elseS != nil {
		sub("else", s.elseS)
	}
	if s.not != nil {
		sub("not", s.not)
	}
	if s.examples != nil {
		val("examples", s.examples)
	}
	if root {
		props("$defs", schemaDefs)
	}
	b.WriteByte('}')
}

// lit writes v as JSON without escaping <, > and & (the descriptions
// mention <Name>).
func lit(b *bytes.Buffer, v any) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic("lockgen: schema value: " + err.Error())
	}
	b.Truncate(b.Len() - 1) // Encode's newline
}
