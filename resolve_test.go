package lockgen

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tempModule writes files (path → source) into a new module
// example.com/m and returns its directory.
func tempModule(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	files["go.mod"] = "module example.com/m\n\ngo 1.22\n"
	for name, src := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// A key type declared beside the generated file, in the output package
// itself, is used unqualified: importing it would be an import cycle.
func TestParamTypeFromTheOutputPackageIsNotImported(t *testing.T) {
	dir := tempModule(t, map[string]string{"gen/types.go": "package locks\n\ntype OrderID int64\n"})
	src := "version: 1\npackage: locks\noutput: gen/locks_gen.go\nlocks:\n  A:\n    key: \"a:${id}\"\n    params: {id: example.com/m/gen.OrderID}\n"
	s, err := Parse(filepath.Join(dir, "locks.yaml"), []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	out, err := Render(s)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(out.Content); strings.Contains(got, `"example.com/m/gen"`) || !strings.Contains(got, "id OrderID") {
		t.Errorf("the generated file imports its own package, or does not use OrderID unqualified:\n%s", got)
	}
}
