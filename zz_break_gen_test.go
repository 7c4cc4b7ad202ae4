package lockgen

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func zzModule(t *testing.T, files map[string]string) string {
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

// TestZZTimeTimeBehindAnAliasOrEmbedding: time.Time is refused as a key
// param (equal instants render different keys), but the same type under
// an alias, or embedded in a struct (promoting String), is accepted.
func TestZZTimeTimeBehindAnAliasOrEmbedding(t *testing.T) {
	for name, decl := range map[string]string{
		"alias":    "type Instant = time.Time\n",
		"embedded": "type Instant struct{ time.Time }\n",
	} {
		t.Run(name, func(t *testing.T) {
			dir := zzModule(t, map[string]string{
				"domain/d.go": "package domain\n\nimport \"time\"\n\n" + decl,
			})
			file := filepath.Join(dir, "locks.yaml")
			src := "version: 1\npackage: locks\noutput: gen/locks_gen.go\nlocks:\n  A:\n    key: \"a:${at}\"\n    params: {at: example.com/m/domain.Instant}\n"
			s, err := Parse(file, []byte(src))
			if err != nil {
				t.Fatal(err)
			}
			_, err = Render(s)
			if err == nil || !strings.Contains(err.Error(), "time.Time") && !strings.Contains(err.Error(), "cannot be a key param") {
				t.Errorf("domain.Instant (%s) accepted as a key param: got err %v, want it refused like time.Time", strings.TrimSpace(decl), err)
			}
		})
	}
}

// TestZZInterfaceBehindAStructOrAPointer: interface params are refused
// (text unknown until run time, a nil value panics in the generated key
// function); the same through an embedded interface, or a pointer alias,
// is accepted.
func TestZZInterfaceBehindAStructOrAPointer(t *testing.T) {
	for name, decl := range map[string]string{
		"embedded-interface": "type Ref struct{ fmt.Stringer }\n\nvar _ = fmt.Sprint\n",
		"pointer-alias":      "type Code struct{ N int }\n\nfunc (c *Code) String() string { return fmt.Sprint(c.N) }\n\ntype Ref = *Code\n",
	} {
		t.Run(name, func(t *testing.T) {
			dir := zzModule(t, map[string]string{
				"domain/d.go": "package domain\n\nimport \"fmt\"\n\n" + decl,
			})
			file := filepath.Join(dir, "locks.yaml")
			src := "version: 1\npackage: locks\noutput: gen/locks_gen.go\nlocks:\n  A:\n    key: \"a:${ref}\"\n    params: {ref: example.com/m/domain.Ref}\n"
			s, err := Parse(file, []byte(src))
			if err != nil {
				t.Fatal(err)
			}
			_, err = Render(s)
			if err == nil {
				t.Errorf("domain.Ref (%s) accepted as a key param: a nil value panics in the key function, as for an interface param", name)
			}
		})
	}
}

// TestZZParamTypeFromTheOutputPackageItself: a key type declared beside
// the generated file (same package) must not be imported by it.
func TestZZParamTypeFromTheOutputPackageItself(t *testing.T) {
	dir := zzModule(t, map[string]string{
		"gen/types.go": "package locks\n\ntype OrderID int64\n",
	})
	file := filepath.Join(dir, "locks.yaml")
	src := "version: 1\npackage: locks\noutput: gen/locks_gen.go\nlocks:\n  A:\n    key: \"a:${id}\"\n    params: {id: example.com/m/gen.OrderID}\n"
	s, err := Parse(file, []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	out, err := Render(s)
	if err != nil {
		t.Logf("refused: %v", err)
		return
	}
	_ = out
	if strings.Contains(string(out.Content), "\"example.com/m/gen\"") {
		t.Errorf("the generated file imports its own package example.com/m/gen (an import cycle)")
	}
}
