package lockgen

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

// TestSpecReferenceIsCurrent keeps docs/spec.md equal to what the schema
// and the kind rules say; -update rewrites it.
func TestSpecReferenceIsCurrent(t *testing.T) {
	path := filepath.Join("docs", "spec.md")
	got := specReference()
	if f := flag.Lookup("update"); f != nil && f.Value.String() == "true" {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("%s is stale (%v): run go test -run TestSpecReferenceIsCurrent -update", path, err)
	}
}
