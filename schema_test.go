package lockgen

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"
)

// TestSchemaListsExactlyTheFieldsTheParserKnows walks the parser's field
// tables and the kinds, and checks the JSON Schema has the same names.
func TestSchemaListsExactlyTheFieldsTheParserKnows(t *testing.T) {
	var s struct {
		Properties map[string]struct {
			Properties map[string]any `json:"properties"`
		} `json:"properties"`
		Defs map[string]struct {
			Properties map[string]struct {
				Enum       []string       `json:"enum"`
				Properties map[string]any `json:"properties"`
			} `json:"properties"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(Schema, &s); err != nil {
		t.Fatal(err)
	}
	lock := s.Defs["lock"].Properties
	var kinds []string
	for _, k := range Kinds {
		kinds = append(kinds, string(k))
	}
	for _, c := range []struct {
		where  string
		schema []string
		parser []string
	}{
		{"top level", keys(s.Properties), topFields},
		{"defaults", keys(s.Properties["defaults"].Properties), defaultsFields},
		{"a lock", keys(lock), lockFields},
		{"fairness", keys(lock["fairness"].Properties), fairnessFields},
		{"kind enum", lock["kind"].Enum, kinds},
	} {
		want := slices.Clone(c.parser)
		sort.Strings(want)
		got := slices.Clone(c.schema)
		sort.Strings(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s: schema has %v, parser knows %v", c.where, got, want)
		}
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestEveryValidSpecValidatesAgainstTheSchema checks every spec that
// lockgen accepts (testdata cases without stderr.txt, the example, the
// init starter) against the JSON Schema, and that the schema rejects
// specs whose errors it can express.
func TestEveryValidSpecValidatesAgainstTheSchema(t *testing.T) {
	c := jsonschema.NewCompiler()
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
	files, _ := filepath.Glob("testdata/*/locks.yaml")
	files = append(files, "example/locks.yaml", "cmd/lockgen/starter.yaml")
	// Errors the schema can express too; the rest (placeholders, cycles,
	// Go types) need the generator.
	schemaRejects := map[string]bool{
		"bad_unknown_top_field": true, "bad_missing_required_fields": true, "bad_version": true,
		"bad_package_name": true, "bad_output_not_go": true, "bad_unknown_lock_field": true,
		"bad_unknown_defaults_field": true, "bad_duration_without_unit": true, "bad_duration_text": true,
		"bad_negative_wait": true, "bad_watchdog_typo": true, "bad_forever_typo": true,
		"bad_unexported_lock_name": true, "bad_lock_name_not_identifier": true, "bad_unknown_kind": true,
		"bad_unknown_basic_type": true, "bad_float_param": true, "bad_user_type_syntax": true,
		"bad_lock_not_a_mapping": true, "bad_params_not_a_mapping": true, "bad_no_locks": true,
		"bad_root_is_a_list": true, "bad_multi_with_key_and_one_member": false,
		"bad_writers_on_non_readwrite": true, "bad_queue_timeout_on_readwrite": true,
		"bad_writers_value": true, "bad_queue_timeout_not_positive": true,
		"bad_fields_of_other_kinds": true, "bad_sync_replicas_value": true, "bad_sync_replicas_on_red_and_multi": true,
		"bad_quorum": true, "bad_atomic_value": true,
		"bad_red_member": false, "bad_atomic_members_in_different_slots": false, "bad_atomic_non_reentrant_members": false,
	}
	checked := 0
	for _, f := range files {
		name := filepath.Base(filepath.Dir(f))
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := yaml.Unmarshal(src, &v); err != nil {
			continue // not YAML at all: nothing for a schema to say
		}
		js, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(js))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		verr := sch.Validate(inst)
		_, statErr := os.Stat(filepath.Join(filepath.Dir(f), "stderr.txt"))
		valid := os.IsNotExist(statErr)
		switch {
		case valid && verr != nil:
			t.Errorf("%s is a valid spec but the schema rejects it: %v", f, verr)
		case !valid && schemaRejects[name] && verr == nil:
			t.Errorf("%s is invalid and the schema should reject it", f)
		}
		checked++
	}
	if checked < 10 {
		t.Fatalf("checked only %d specs", checked)
	}
}
