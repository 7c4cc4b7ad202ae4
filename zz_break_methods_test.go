package lockgen

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func zzGenerateIn(t *testing.T, files map[string]string) (*Output, error) {
	t.Helper()
	root, _ := filepath.Abs(".")
	dir := t.TempDir()
	files["go.mod"] = "module example.com/m\n\ngo 1.24\n\nrequire github.com/lockgen/lockgen v0.0.0\n\nreplace github.com/lockgen/lockgen => " + root + "\n"
	for n, s := range files {
		p := filepath.Join(dir, filepath.FromSlash(n))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return Generate(filepath.Join(dir, "locks.yaml"))
}

// MarshalText() (text []byte, err error) and String() (s string) are the
// methods the docs ask for, with named results; implements compares the
// results' text, so both are refused, telling the user to add the method
// the type already has.
func TestZZNamedResultMethodsRefused(t *testing.T) {
	_, err := zzGenerateIn(t, map[string]string{
		"locks.yaml": "version: 1\npackage: locks\nlocks:\n  A:\n    key: \"a:${k}\"\n    params: {k: example.com/m/nr.T}\n  B:\n    key: \"b:${s}\"\n    params: {s: example.com/m/nr.S}\n",
		"nr/nr.go":   "package nr\n\ntype T struct{ V int }\n\nfunc (t T) MarshalText() (text []byte, err error) { return []byte(\"x\"), nil }\n\ntype S struct{ V int }\n\nfunc (s S) String() (out string) { return \"s\" }\n",
	})
	if err != nil {
		t.Errorf("types with MarshalText/String methods (named results) refused:\n%v", err)
	}
}

// An interface type with String() is accepted (fmt.Stringer), though any
// and error are refused because "its text is unknown until run time"; a
// nil value makes the generated key function panic.
func TestZZInterfaceStringerAccepted(t *testing.T) {
	out, err := zzGenerateIn(t, map[string]string{
		"locks.yaml": "version: 1\npackage: locks\nlocks:\n  A:\n    key: \"a:${k}\"\n    params: {k: fmt.Stringer}\n",
	})
	if err == nil && strings.Contains(string(out.Content), "k.String()") {
		t.Errorf("fmt.Stringer accepted as a key param: aKey(nil) panics, and its text is as unknown as error's")
	}
}
