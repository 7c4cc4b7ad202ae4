package lockgen

import (
	"errors"
	"go/ast"
	"go/importer"
	goparser "go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"golang.org/x/tools/go/packages"

	"github.com/lockgen/lockgen/templates"
)

// zzImporter type-checks generated files against the real runtime package.
var (
	zzOnce sync.Once
	zzPkgs map[string]*types.Package
	zzErr  error
)

type zzImp struct{ fallback types.Importer }

func (i zzImp) Import(path string) (*types.Package, error) {
	if p, ok := zzPkgs[path]; ok {
		return p, nil
	}
	return i.fallback.Import(path)
}

func zzLoad(t testing.TB) {
	zzOnce.Do(func() {
		pkgs, err := packages.Load(&packages.Config{Mode: packages.NeedTypes | packages.NeedName | packages.NeedImports | packages.NeedDeps},
			"github.com/lockgen/lockgen/runtime", "context", "strconv", "strings", "time", "errors")
		if err != nil {
			zzErr = err
			return
		}
		zzPkgs = map[string]*types.Package{}
		packages.Visit(pkgs, nil, func(p *packages.Package) { zzPkgs[p.PkgPath] = p.Types })
	})
	if zzErr != nil {
		t.Fatal(zzErr)
	}
}

// zzTypeCheck parses src, emits it with basic params only, and type-checks
// the result. It returns "" when the spec is rejected or uses user types.
func zzTypeCheck(t testing.TB, src []byte) (gen []byte, typeErr error, ok bool) {
	spec, err := Parse("locks.yaml", src)
	if err != nil {
		var list ErrorList
		if !errors.As(err, &list) {
			t.Fatalf("not an ErrorList: %v", err)
		}
		return nil, nil, false
	}
	file := templates.File{Path: "example.com/locks", Package: spec.Package, Source: "locks.yaml", Imports: map[string]string{}}
	for _, l := range spec.Locks {
		for _, p := range l.Params {
			if p.Type.Basic == "" {
				return nil, nil, false
			}
		}
		file.Locks = append(file.Locks, lockModel(l))
	}
	out, err := templates.Emit(file)
	if err != nil {
		return nil, err, true
	}
	fset := token.NewFileSet()
	f, err := goparser.ParseFile(fset, "locks_gen.go", out, goparser.ParseComments)
	if err != nil {
		return out, err, true
	}
	conf := types.Config{Importer: zzImp{importer.Default()}}
	_, err = conf.Check("example.com/locks", fset, []*ast.File{f}, nil)
	return out, err, true
}

func FuzzZZTypeCheck(f *testing.F) {
	files, _ := filepath.Glob("testdata/*/locks.yaml")
	files = append(files, "example/locks.yaml")
	for _, name := range files {
		if src, err := os.ReadFile(name); err == nil {
			f.Add(src)
		}
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		zzLoad(t)
		out, err, ok := zzTypeCheck(t, src)
		if ok && err != nil {
			t.Fatalf("accepted spec generates code that does not type-check: %v\nspec:\n%s\n", err, src)
		}
		_ = out
	})
}
