package lockgen

import (
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	goparser "go/parser"
	"go/token"
	"go/types"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/tools/go/packages"

	"github.com/lockgen/lockgen/templates"
)

// typeCheckImp imports the packages generated code uses, loaded once
// from this module, so generated files type-check against the real runtime.
var (
	typeCheckOnce sync.Once
	typeCheckPkgs map[string]*types.Package
	typeCheckErr  error
)

type typeCheckImp struct{ fallback types.Importer }

func (i typeCheckImp) Import(path string) (*types.Package, error) {
	if p, ok := typeCheckPkgs[path]; ok {
		return p, nil
	}
	return i.fallback.Import(path)
}

func loadTypeCheckPkgs(t testing.TB) {
	typeCheckOnce.Do(func() {
		pkgs, err := packages.Load(&packages.Config{Mode: packages.NeedTypes | packages.NeedName | packages.NeedImports | packages.NeedDeps},
			"github.com/lockgen/lockgen/runtime", "context", "strconv", "strings", "time", "errors")
		if err != nil {
			typeCheckErr = err
			return
		}
		typeCheckPkgs = map[string]*types.Package{}
		packages.Visit(pkgs, nil, func(p *packages.Package) { typeCheckPkgs[p.PkgPath] = p.Types })
	})
	if typeCheckErr != nil {
		t.Fatal(typeCheckErr)
	}
}

// emitAndTypeCheck parses src, emits it, and type-checks the result; ok is
// false when the spec is rejected or uses user types (which need a module).
func emitAndTypeCheck(t testing.TB, src []byte) (gen []byte, typeErr error, ok bool) {
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
	conf := types.Config{Importer: typeCheckImp{importer.Default()}}
	_, err = conf.Check("example.com/locks", fset, []*ast.File{f}, nil)
	return out, err, true
}

// FuzzAcceptedSpecsTypeCheck: every spec Parse accepts (with basic params)
// generates code that type-checks. The seeds are the golden specs.
func FuzzAcceptedSpecsTypeCheck(f *testing.F) {
	files, _ := filepath.Glob("testdata/*/locks.yaml")
	files = append(files, "example/locks.yaml")
	for _, name := range files {
		if src, err := os.ReadFile(name); err == nil {
			f.Add(src)
		}
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		loadTypeCheckPkgs(t)
		out, err, ok := emitAndTypeCheck(t, src)
		if ok && err != nil {
			t.Fatalf("accepted spec generates code that does not type-check: %v\nspec:\n%s\n", err, src)
		}
		_ = out
	})
}

var (
	randomLockNames  = []string{"A", "B", "L", "M", "Err", "Ctx", "Fn", "Key", "KeyPart", "New", "Locks", "With", "WithA", "Arm", "ArmA", "Await", "CountDown", "Options", "AKey", "AOptions", "Order", "OrderLock", "H", "C", "S", "V", "Ärger", "Ωmega", "\u2126mega", "K1", "Å", "\u212b", "Korder", "\u212aorder", "X_Y", "String", "Error", "Read", "Write", "Do", "Value"}
	randomParamNames = []string{"id", "h", "h_", "hText", "c", "s", "v", "fence", "a", "aKey", "aOptions", "orderKey", "txt", "n", "x", "ä", "ω", "t", "keyEscaper2", "Locks", "New", "A", "WithA", "idText", "lText", "l_"}
	randomParamTypes = []string{"string", "int64", "int", "uint8", "byte", "rune", "bool", "uint64", "int8"}
	randomKinds      = []string{"reentrant", "fair", "readwrite", "red", "semaphore", "latch", "multi", "multi"}
)

func randomSpec(r *rand.Rand) string {
	var b strings.Builder
	b.WriteString("version: 1\npackage: locks\nlocks:\n")
	n := 1 + r.Intn(5)
	used := map[string]bool{}
	var names []string
	for len(names) < n {
		nm := randomLockNames[r.Intn(len(randomLockNames))]
		if !used[nm] {
			used[nm] = true
			names = append(names, nm)
		}
	}
	for i, nm := range names {
		kind := randomKinds[r.Intn(len(randomKinds))]
		fmt.Fprintf(&b, "  %s:\n    kind: %s\n", nm, kind)
		if kind == "multi" {
			var ms []string
			for _, o := range names {
				if o != nm && r.Intn(2) == 0 {
					ms = append(ms, o)
				}
			}
			fmt.Fprintf(&b, "    members: [%s]\n", strings.Join(ms, ", "))
			if r.Intn(3) == 0 {
				b.WriteString("    atomic: true\n")
			}
			continue
		}
		np := r.Intn(4)
		pu := map[string]bool{}
		var ps []string
		for len(ps) < np {
			p := randomParamNames[r.Intn(len(randomParamNames))]
			if !pu[p] {
				pu[p] = true
				ps = append(ps, p)
			}
		}
		key := fmt.Sprintf("k%d", i)
		var decl []string
		for _, p := range ps {
			key += ":${" + p + "}"
			decl = append(decl, p+": "+randomParamTypes[r.Intn(len(randomParamTypes))])
		}
		if r.Intn(4) == 0 && len(ps) > 0 {
			key = "{" + key + "}"
		}
		fmt.Fprintf(&b, "    key: \"%s\"\n", key)
		if len(decl) > 0 {
			fmt.Fprintf(&b, "    params: {%s}\n", strings.Join(decl, ", "))
		}
		switch kind {
		case "semaphore":
			b.WriteString("    permits: 3\n")
		case "latch":
			b.WriteString("    count: 2\n")
		case "reentrant":
			if r.Intn(3) == 0 {
				b.WriteString("    fenced: true\n")
			}
		}
	}
	return b.String()
}

// TestRandomAcceptedSpecsTypeCheck generates random specs from names that
// collide with generated identifiers or fold alike (Korder and the KELVIN
// SIGN's \u212aorder), and type-checks what lockgen generates for every one
// it accepts: an accepted spec must never give code that does not compile.
// RANDOM_SPECS=n runs n specs instead of the quick default.
func TestRandomAcceptedSpecsTypeCheck(t *testing.T) {
	loadTypeCheckPkgs(t)
	iters := 300 // about 9 s under -race, 4.5 of them loading packages; a pair that folds alike comes up every few dozen specs
	if n := os.Getenv("RANDOM_SPECS"); n != "" {
		fmt.Sscan(n, &iters)
	}
	r := rand.New(rand.NewSource(1))
	accepted, failures := 0, 0
	seen := map[string]bool{}
	for i := 0; i < iters; i++ {
		src := randomSpec(r)
		_, err, ok := emitAndTypeCheck(t, []byte(src))
		if !ok {
			continue
		}
		accepted++
		if err != nil {
			msg := err.Error()
			if i := strings.Index(msg, ": "); i > 0 {
				msg = msg[i:]
			}
			if !seen[msg] {
				seen[msg] = true
				failures++
				t.Errorf("accepted spec does not type-check: %v\n%s", err, src)
			}
			if failures > 8 {
				break
			}
		}
	}
	t.Logf("%d accepted of %d", accepted, iters)
}
