package lockgen

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/lockgen/lockgen/templates"
)

// FuzzParse feeds arbitrary bytes to the parser and validator. It must
// never panic, every error must be an ErrorList whose entries all carry a
// position, and a spec it accepts (with basic param types) must render to
// Go source that gofmt accepts.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*/locks.yaml")
	files = append(files, "example/locks.yaml")
	for _, name := range files {
		if src, err := os.ReadFile(name); err == nil {
			f.Add(src)
		}
	}
	f.Add([]byte("version: 1\npackage: p\nlocks:\n  A: {key: \"a:{${x}}\", params: {x: string}, slot: x}\n"))
	f.Add([]byte("version: &v [*v]\npackage: p\nlocks: {A: {key: a, members: &m [*m]}}\n"))
	f.Add([]byte("x: &a [1,1,1,1,1,1,1,1,1,1]\ny: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\nz: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\nversion: 1\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		spec, err := Parse("locks.yaml", src)
		if err != nil {
			var list ErrorList
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("error is not a non-empty ErrorList: %T %v", err, err)
			}
			for _, e := range list {
				if e.Pos.Line < 1 || e.Pos.Col < 1 || e.File != "locks.yaml" || e.Msg == "" {
					t.Fatalf("error without position or message: %#v", e)
				}
			}
			return
		}
		file := templates.File{Path: "example.com/locks", Package: spec.Package, Source: "locks.yaml"}
		for _, l := range spec.Locks {
			for _, p := range l.Params {
				if p.Type.Basic == "" {
					return // user types need go/packages
				}
			}
			file.Locks = append(file.Locks, lockModel(l))
		}
		if _, err := templates.Emit(file); err != nil {
			t.Fatalf("valid spec renders invalid Go: %v\n%s", err, src)
		}
	})
}
