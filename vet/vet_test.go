package vet_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/lockgen/lockgen"
	"github.com/lockgen/lockgen/vet"
)

// testModule copies testdata/src into a module that uses this repository
// (by replace) and generates its locks package from locks.yaml, so the
// tests run on code exactly as lockgen generates it today.
func testModule(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	err = filepath.WalkDir("testdata/src", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel("testdata/src", path)
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	mod := "module example.com/vettest\n\ngo 1.24\n\nrequire github.com/lockgen/lockgen v0.0.0\n\nreplace github.com/lockgen/lockgen => " + root + "\n"
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"go.mod": []byte(mod), "go.sum": sum} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Set before generating: a param of a user type is resolved with the
	// go command, in this module.
	t.Setenv("GOFLAGS", "-mod=mod")
	out, err := lockgen.Generate(filepath.Join(dir, "locks", "locks.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := out.Write(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestAnalyzer runs the analyzer on the packages of testdata/src and
// checks its findings and facts against their // want comments.
func TestAnalyzer(t *testing.T) {
	dir := testModule(t)
	pkgs := []string{"order", "helper", "cross/a", "cross/b", "linked/app", "linked/quiet", "multi", "ctxuse", "unlock", "clean", "direct", "fenced", "permits"}
	for i, p := range pkgs {
		pkgs[i] = "./" + p
	}
	analysistest.Run(t, dir, vet.Analyzer, pkgs...)
}
