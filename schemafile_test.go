package lockgen_test

import (
	"bytes"
	"os"
	"testing"

	"github.com/lockgen/lockgen"
)

// TestCommittedSchemaIsCurrent keeps locks.schema.json, which editors load
// by URL, equal to the schema lockgen checks specs against. go generate
// (or go test -run TestCommittedSchemaIsCurrent -update) rewrites it.
func TestCommittedSchemaIsCurrent(t *testing.T) {
	compareGolden(t, "locks.schema.json", lockgen.Schema)
}

// TestWriteSchemaReplacesOnlyLockgenSchemas: an absent file or an older
// lockgen schema is written, anything else is refused and left alone.
func TestWriteSchemaReplacesOnlyLockgenSchemas(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"old.json":     `{"$id": "https://raw.githubusercontent.com/lockgen/lockgen/main/locks.schema.json"}`,
		"foreign.json": `{"$id": "https://example.com/x.json"}`,
		"broken.json":  `{`,
	})
	for name, want := range map[string]bool{"old.json": true, "new.json": true, "foreign.json": false, "broken.json": false} {
		p := dir + "/" + name
		before, _ := os.ReadFile(p)
		changed, err := lockgen.WriteSchema(p)
		after, _ := os.ReadFile(p)
		switch {
		case want && (err != nil || !changed || !bytes.Equal(after, lockgen.Schema)):
			t.Errorf("%s: WriteSchema = %v, %v; want the schema written", name, changed, err)
		case !want && (err == nil || changed || !bytes.Equal(after, before)):
			t.Errorf("%s: WriteSchema = %v, %v; want a refusal and the file unchanged", name, changed, err)
		}
		if state, _ := lockgen.CheckSchema(p); want && state != lockgen.SchemaCurrent {
			t.Errorf("%s: CheckSchema = %v after writing", name, state)
		}
	}
	if changed, err := lockgen.WriteSchema(dir + "/new.json"); changed || err != nil {
		t.Errorf("rewriting a current schema: %v, %v; want no change", changed, err)
	}
}
