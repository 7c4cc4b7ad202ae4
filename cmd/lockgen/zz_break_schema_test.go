package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const zzSpecBody = "version: 1\npackage: app\nlocks:\n  A:\n    key: \"a:${id}\"\n    params: {id: int64}\n"

// The modeline's schema path is followed wherever it leads: generate
// creates directories and writes locks.schema.json outside the module.
func TestZZModelineSchemaWritesOutsideTheModule(t *testing.T) {
	parent := t.TempDir()
	mod := tempModule(t)
	// The module lives in its own temp dir; point the modeline at a new
	// directory beside it, through ..
	rel, err := filepath.Rel(mod, filepath.Join(parent, "escaped", "deep", "locks.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(mod, "locks.yaml")
	src := "# yaml-language-server: $schema=" + filepath.ToSlash(rel) + "\n" + zzSpecBody
	if err := os.WriteFile(spec, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, "generate", "-config", spec)
	t.Logf("exit %d\n%s%s", code, out, errs)
	if _, err := os.Stat(filepath.Join(parent, "escaped", "deep", "locks.schema.json")); err == nil {
		t.Errorf("generate wrote %s, outside the module %s (and created its directories)", filepath.Join(parent, "escaped", "deep", "locks.schema.json"), mod)
	}
}

// A modeline naming a path that cannot be written: generate writes the Go
// file, then fails with a bare OS error (no spec position, no fix).
func TestZZModelineSchemaUnwritableLeavesPartialOutput(t *testing.T) {
	mod := tempModule(t)
	spec := filepath.Join(mod, "locks.yaml")
	src := "# yaml-language-server: $schema=locks.yaml/x.json\n" + zzSpecBody
	if err := os.WriteFile(spec, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, "generate", "-config", spec)
	t.Logf("exit %d\nstdout: %sstderr: %s", code, out, errs)
	_, statErr := os.Stat(filepath.Join(mod, "locks_gen.go"))
	if code != 0 && statErr == nil {
		t.Errorf("generate failed (exit %d) but left locks_gen.go written: partial output", code)
	}
	if code != 0 && !strings.Contains(errs, "locks.yaml:1:") {
		t.Errorf("the failure does not name the modeline's place in the spec: %q", errs)
	}
}
