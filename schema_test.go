package lockgen

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"
)

// parserOnly are the malformed specs that only lockgen rejects, each with
// the reason a JSON Schema cannot: the rule spans fields or locks, needs Go
// or Redis knowledge, or is about YAML rather than its data. Every other
// malformed spec must be rejected by the schema too.
var parserOnly = map[string]string{
	"bad_adjacent_placeholders":             "placeholders inside a key pattern",
	"bad_atomic_members_in_different_slots": "cluster slots of other locks' keys",
	"bad_atomic_non_reentrant_members":      "kinds of other locks",
	"bad_duplicate_field":                   "duplicate YAML keys (JSON has none)",
	"bad_duplicate_lock_name":               "duplicate YAML keys (JSON has none)",
	"bad_yaml_merge_key":                    "YAML merge keys (JSON has none: the JSON reading merges them)",
	"bad_empty_placeholder":                 "placeholders inside a key pattern",
	"bad_placeholder_columns_after_escapes": "placeholders inside a key pattern",
	"bad_generated_name_collision":          "generated names of two locks",
	"bad_latch_method_collision":            "generated names of two locks",
	"bad_lock_names_fold_to_one_helper":     "generated names of two locks",
	"bad_two_locks_one_key_space":           "other locks' key patterns",
	"bad_lease_below_minimum":               "a duration's value (10ms minimum)",
	"bad_queue_timeout_below_minimum":       "a duration's value (10ms minimum)",
	"bad_empty_hash_tag":                    "braces inside a key pattern",
	"bad_member_cycle":                      "other locks' members",
	"bad_member_param_type_conflict":        "other locks' params",
	"bad_nested_hash_tag":                   "braces inside a key pattern",
	"bad_red_member":                        "kinds of other locks",
	"bad_synchronizer_member":               "kinds of other locks",
	"bad_fenced_member":                     "fields of other locks",
	"bad_slot":                              "braces inside a slot pattern",
	"bad_unbalanced_close_brace":            "braces inside a key pattern",
	"bad_unbalanced_open_brace":             "braces inside a key pattern",
	"bad_unclosed_placeholder":              "placeholders inside a key pattern",
	"bad_undeclared_placeholder":            "placeholders against params",
	"bad_placeholder_near_a_declared_param": "placeholders against params",
	"bad_placeholder_with_no_likely_param":  "placeholders against params",
	"bad_unused_param":                      "params against placeholders",
	"bad_zero_lease":                        "a duration's value (0 expires at once)",
	"bad_lock_fields_indented_too_shallow":  "YAML indentation (the fields are read as the lock's)",
	"inline: reserved helper name as param": "names of other locks' generated helpers",
	"inline: placeholder with a keyword":    "placeholders inside a key pattern",
	"inline: multi lock with a red member":  "kinds of other locks",
	"inline: lease below the minimum":       "a duration's value (10ms minimum)",
	"inline: yaml syntax":                   "not YAML: no data for a schema",
	"inline: tab indentation":               "not YAML: no data for a schema",
	"bad_yaml_syntax":                       "not YAML: no data for a schema",
	"bad_yaml_tab_indent":                   "not YAML: no data for a schema",
	"bad_yaml_tab_after_spaces":             "not YAML: no data for a schema",
	"bad_alias_contains_itself":             "an alias inside its own value: not data for a schema",
	"bad_empty_file":                        "an empty file is not a JSON document",
	"bad_second_yaml_document":              "a second YAML document: JSON has one",
	"bad_output_built_only_for_one_target":  "go/build's _GOOS and _GOARCH file name suffixes",
}

// inlineSpecs are malformed specs beside testdata/, one per shape rule the
// schema states, and the cases issue 12 found where the two disagreed.
var inlineSpecs = map[string]string{
	"version as a string":                   "version: \"1\"\npackage: p\nlocks:\n  A: {key: a}\n",
	"version 1.5":                           "version: 1.5\npackage: p\nlocks:\n  A: {key: a}\n",
	"key as a number":                       "version: 1\npackage: p\nlocks:\n  A: {key: 123}\n",
	"slot as a number":                      "version: 1\npackage: p\nlocks:\n  A: {key: a, slot: 7}\n",
	"doc as a number":                       "version: 1\npackage: p\nlocks:\n  A: {key: a, doc: 7}\n",
	"package as a boolean":                  "version: 1\npackage: true\nlocks:\n  A: {key: a}\n",
	"package keyword":                       "version: 1\npackage: func\nlocks:\n  A: {key: a}\n",
	"output absolute":                       "version: 1\npackage: p\noutput: /x.go\nlocks:\n  A: {key: a}\n",
	"output drive letter":                   "version: 1\npackage: p\noutput: \"C:/x.go\"\nlocks:\n  A: {key: a}\n",
	"output test file":                      "version: 1\npackage: p\noutput: x_test.go\nlocks:\n  A: {key: a}\n",
	"output .go only":                       "version: 1\npackage: p\noutput: .go\nlocks:\n  A: {key: a}\n",
	"lease with a leading dot":              "version: 1\npackage: p\nlocks:\n  A: {key: a, lease: .5s}\n",
	"lease negative":                        "version: 1\npackage: p\nlocks:\n  A: {key: a, lease: -1s}\n",
	"wait as a list":                        "version: 1\npackage: p\nlocks:\n  A: {key: a, waitTime: [1s]}\n",
	"syncReplicas as a string":              "version: 1\npackage: p\nlocks:\n  A: {key: a, syncReplicas: \"1\"}\n",
	"syncReplicas negative":                 "version: 1\npackage: p\ndefaults: {syncReplicas: -1}\nlocks:\n  A: {key: a}\n",
	"quorum as a string":                    "version: 1\npackage: p\nlocks:\n  A: {kind: red, key: a, quorum: \"3\"}\n",
	"atomic as a string":                    "version: 1\npackage: p\nlocks:\n  A: {key: a}\n  B: {key: b}\n  C: {kind: multi, members: [A, B], atomic: \"true\"}\n",
	"params null on a multi lock":           "version: 1\npackage: p\nlocks:\n  A: {key: a}\n  B: {key: b}\n  C: {kind: multi, members: [A, B], params: }\n",
	"fairness empty on a reentrant lock":    "version: 1\npackage: p\nlocks:\n  A: {key: a, fairness: {}}\n",
	"members on a fair lock":                "version: 1\npackage: p\nlocks:\n  A: {key: a}\n  B: {key: b}\n  C: {kind: fair, key: c, members: [A, B]}\n",
	"multi lock without members":            "version: 1\npackage: p\nlocks:\n  C: {kind: multi}\n",
	"member listed twice":                   "version: 1\npackage: p\nlocks:\n  A: {key: a}\n  C: {kind: multi, members: [A, A]}\n",
	"member not a name":                     "version: 1\npackage: p\nlocks:\n  A: {key: a}\n  C: {kind: multi, members: [A, 7]}\n",
	"param type not a string":               "version: 1\npackage: p\nlocks:\n  A: {key: \"a:${x}\", params: {x: 7}}\n",
	"param name keyword":                    "version: 1\npackage: p\nlocks:\n  A: {key: \"a:${type}\", params: {type: string}}\n",
	"param name not an identifier":          "version: 1\npackage: p\nlocks:\n  A: {key: \"a:${x}\", params: {x: string, a-b: string}}\n",
	"locks empty":                           "version: 1\npackage: p\nlocks: {}\n",
	"locks null":                            "version: 1\npackage: p\nlocks:\n",
	"lock null":                             "version: 1\npackage: p\nlocks:\n  A:\n",
	"kind unknown":                          "version: 1\npackage: p\nlocks:\n  A: {kind: spin, key: a}\n",
	"writers unknown":                       "version: 1\npackage: p\nlocks:\n  A: {kind: readwrite, key: a, fairness: {writers: last}}\n",
	"reserved helper name as param":         "version: 1\npackage: p\nlocks:\n  A: {key: \"a:${bLockKey}\", params: {bLockKey: string}}\n  BLock: {key: b}\n",
	"placeholder with a keyword":            "version: 1\npackage: p\nlocks:\n  A: {key: \"a:${type}\"}\n",
	"multi lock with a red member":          "version: 1\npackage: p\nlocks:\n  A: {key: a}\n  R: {kind: red, key: r}\n  C: {kind: multi, members: [A, R]}\n",
	"lease below the minimum":               "version: 1\npackage: p\nlocks:\n  A: {key: a, lease: 1ms}\n",
	"merge key":                             "version: 1\npackage: p\nbase: &b {key: a}\nlocks:\n  A:\n    <<: *b\n",
	"yaml syntax":                           "version: 1\npackage: [p\n",
	"tab indentation":                       "version: 1\npackage: p\nlocks:\n\tA: {key: a}\n",
	"writers and queueTimeout mixed":        "version: 1\npackage: p\nlocks:\n  A: {kind: fair, key: a, fairness: {queueTimeout: 1m, writers: first}}\n",
	"quorum zero":                           "version: 1\npackage: p\nlocks:\n  A: {kind: red, key: a, quorum: 0}\n",
	"top-level unknown field":               "version: 1\npackage: p\nlock:\n  A: {key: a}\n",
	"root not a mapping":                    "- version: 1\n",
	"unknown field in fairness":             "version: 1\npackage: p\nlocks:\n  A: {kind: fair, key: a, fairness: {timeout: 1m}}\n",
	"syncReplicas on red lock via defaults": "version: 1\npackage: p\nlocks:\n  A: {kind: red, key: a, syncReplicas: 1}\n",
}

// specCase is a spec and where it comes from.
type specCase struct {
	name string
	src  []byte
	bad  bool // lockgen rejects it (testdata stderr.txt: Parse, or Render for Go and file errors; or inline: Parse)
}

func allSpecs(t *testing.T) []specCase {
	t.Helper()
	files, _ := filepath.Glob("testdata/*/locks.yaml")
	files = append(files, "example/locks.yaml", "cmd/lockgen/starter.yaml")
	var cases []specCase
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(filepath.Dir(f))
		if !strings.HasPrefix(f, "testdata/") {
			name = f
		}
		_, statErr := os.Stat(filepath.Join(filepath.Dir(f), "stderr.txt"))
		cases = append(cases, specCase{name: name, src: src, bad: statErr == nil})
	}
	for name, src := range inlineSpecs {
		cases = append(cases, specCase{name: "inline: " + name, src: []byte(src), bad: true})
	}
	sort.Slice(cases, func(i, j int) bool { return cases[i].name < cases[j].name })
	return cases
}

// compiledSchema compiles Schema with an independent validator.
func compiledSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(Schema))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddResource("locks.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("locks.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

// asJSON is the JSON data a YAML document stands for, or false when it is
// not YAML (or empty): then there is nothing for a schema to check.
func asJSON(t *testing.T, src []byte) (any, bool) {
	var v any
	if err := yaml.Unmarshal(src, &v); err != nil || v == nil {
		return nil, false
	}
	js, err := json.Marshal(v)
	if err != nil {
		return nil, false // a YAML-only value (a map with non-string keys)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(js))
	if err != nil {
		t.Fatal(err)
	}
	return inst, true
}

// TestSchemaAndParserAgree feeds every spec (the golden cases, the example,
// the starter, and inlineSpecs) to Parse and to the JSON Schema under an
// independent validator, and compares the verdicts: the schema rejects
// exactly the malformed specs that are not in parserOnly, and accepts every
// spec lockgen accepts. It also checks that Parse's own schema check reads
// the schema as that validator does.
func TestSchemaAndParserAgree(t *testing.T) {
	sch := compiledSchema(t)
	seen := map[string]bool{}
	for _, c := range allSpecs(t) {
		_, perr := Parse("locks.yaml", c.src)
		parserRejects := perr != nil
		inst, isData := asJSON(t, c.src)
		schemaRejects := !isData || sch.Validate(inst) != nil
		var doc yaml.Node
		ownRejects := yaml.Unmarshal(c.src, &doc) != nil || len(doc.Content) == 0 || len(validateShape(specSchema, doc.Content[0], "")) > 0
		reason, only := parserOnly[c.name]
		seen[c.name] = true
		switch {
		case strings.HasPrefix(c.name, "inline: ") && !parserRejects:
			t.Errorf("%s: lockgen accepts it", c.name)
		case !c.bad && parserRejects:
			t.Errorf("%s: lockgen rejects a valid spec: %v", c.name, perr)
		case isData && ownRejects != schemaRejects:
			t.Errorf("%s: Parse's schema check says rejected=%v, the validator %v", c.name, ownRejects, schemaRejects)
		case schemaRejects && !parserRejects:
			t.Errorf("%s: the schema rejects it but lockgen accepts it", c.name)
		case parserRejects && !schemaRejects && !only:
			t.Errorf("%s: lockgen rejects it but the schema accepts it: make the schema say so, or list it in parserOnly with the reason (lockgen said: %v)", c.name, perr)
		case only && (schemaRejects && isData || !parserRejects):
			t.Errorf("%s is in parserOnly (%s) but the schema rejects it too, or lockgen accepts it: remove it from parserOnly", c.name, reason)
		}
	}
	for name := range parserOnly {
		if !seen[name] {
			t.Errorf("parserOnly lists %s, which is no spec", name)
		}
	}
}

// fieldSamples holds a valid value for every field of a lock, in a spec
// where the lock is of a kind that takes it.
var fieldSamples = map[string]string{
	"doc": "doc: x", "kind": "kind: reentrant", "key": "key: a", "params": "key: \"a:${x}\", params: {x: string}",
	"lease": "lease: 1s", "waitTime": "waitTime: forever", "syncReplicas": "syncReplicas: 1",
	"fairness": "kind: fair, fairness: {queueTimeout: 1m}", "members": "kind: multi, members: [B, C]",
	"atomic": "kind: multi, members: [B, C], atomic: false", "quorum": "kind: red, quorum: 2", "slot": "slot: s",
	"fenced": "fenced: true", "permits": "kind: semaphore, permits: 3", "count": "kind: latch, count: 2",
}

// TestEverySchemaFieldIsReadByTheParser sets each lock field the schema
// declares and checks that Parse reads it (a field the schema has and the
// parser's switch lacks is reported as not read).
func TestEverySchemaFieldIsReadByTheParser(t *testing.T) {
	for _, f := range lockFields {
		sample, ok := fieldSamples[f]
		if !ok {
			t.Errorf("no sample for the lock field %s: add one to fieldSamples", f)
			continue
		}
		key := "key: a, "
		if strings.Contains(sample, "multi") || strings.Contains(sample, "key:") {
			key = ""
		}
		spec := "version: 1\npackage: p\nlocks:\n  B: {key: b}\n  C: {key: c}\n  A: {" + key + sample + "}\n"
		if _, err := Parse("locks.yaml", []byte(spec)); err != nil {
			t.Errorf("%s: %v\n%s", f, err, spec)
		}
	}
}
