package lockgen

import (
	"errors"
	"fmt"
	"go/types"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"golang.org/x/tools/go/packages"

	"github.com/lockgen/lockgen/templates"
)

// target is the Go package the generated file belongs to.
type target struct {
	path string // import path
	dir  string // absolute directory
	file string // absolute path of the generated file
}

// resolve finds the output package and resolves every user param type,
// with one go/packages call. Problems in the spec are added to e; a
// failure of the go command itself is returned.
func resolve(s *Spec, e *errs) (target, error) {
	specDir, err := filepath.Abs(filepath.Dir(s.File))
	if err != nil {
		return target{}, err
	}
	mod, err := findModule(specDir)
	if err != nil {
		return target{}, err
	}
	if mod == nil {
		return target{}, &NoModuleError{Spec: s.File, Dir: specDir}
	}
	t := target{file: filepath.Join(specDir, filepath.FromSlash(s.Output))}
	t.dir = filepath.Dir(t.file)
	checkSchemaPath(s, mod, specDir, e)
	if !checkOutputPath(s, mod, t.file, e) {
		return t, nil // reported at output: load nothing for a file that will not be written
	}

	var user []string
	seen := map[string]bool{}
	for _, l := range s.Locks {
		for _, p := range l.Params {
			if p.Type.Path != "" && !seen[p.Type.Path] {
				seen[p.Type.Path] = true
				user = append(user, p.Type.Path)
			}
		}
	}
	sort.Strings(user)

	cfg := &packages.Config{
		Dir:  specDir,
		Mode: packages.NeedName | packages.NeedModule | packages.NeedFiles,
		// The output package is loaded with the generated file replaced
		// by its package clause: the directory need not exist yet, and a
		// stale generated file cannot break the load.
		Overlay: map[string][]byte{t.file: []byte("package " + s.Package + "\n")},
		Tests:   false,
	}
	if len(user) > 0 {
		// Imports: the graph checkImportable walks, which the go command
		// lists anyway to type-check the params' packages.
		cfg.Mode |= packages.NeedTypes | packages.NeedSyntax | packages.NeedImports
	}
	pkgs, err := packages.Load(cfg, append([]string{t.dir}, user...)...)
	if err != nil {
		return target{}, fmt.Errorf("loading Go packages: %w", err)
	}
	byPath := map[string]*packages.Package{}
	for _, p := range pkgs {
		for _, f := range p.GoFiles {
			if f == t.file {
				if err := outputPackage(s, p, &t, e); err != nil {
					return target{}, err
				}
			}
		}
		byPath[p.PkgPath] = p
	}
	if t.path == "" {
		// What the go command said of the output directory says why.
		for _, p := range pkgs {
			if !seen[p.PkgPath] && len(p.Errors) > 0 {
				return target{}, fmt.Errorf("cannot find the Go package of %s: %s", t.dir, firstLine(p.Errors[0].Msg))
			}
		}
		return target{}, fmt.Errorf("cannot find the Go package of %s (is it inside a Go module?)", t.dir)
	}
	for _, l := range s.Locks {
		for _, p := range l.Params {
			if p.Type.Path != "" {
				resolveParam(l, p, byPath[p.Type.Path], e)
			}
		}
	}
	if len(user) > 0 {
		checkImportable(s, t, byPath, e)
		// Parse skipped the locks with user types: only now is it known
		// which render digits only.
		validateKeySpaces(s, e)
	}
	return t, nil
}

// outputPackage records the import path of the generated package, and
// reports a package name that differs from the other files there.
func outputPackage(s *Spec, p *packages.Package, t *target, e *errs) error {
	for _, perr := range p.Errors {
		msg := perr.Msg
		switch {
		case strings.Contains(msg, "found packages"):
			other := "theirs"
			for _, m := range foundRE.FindStringSubmatch(msg)[1:] {
				if m != s.Package {
					other = m
				}
			}
			e.add(s.packagePos, "package", "%s differs from package %s of the Go files in %s/ (use package: %s, or another output directory)", s.Package, other, filepath.ToSlash(filepath.Dir(s.Output)), other)
		case strings.Contains(msg, "outside main module") || strings.Contains(msg, "go.mod file not found") || p.Module == nil && p.PkgPath == "":
			return fmt.Errorf("the output directory %s is not part of the main module (%s); run lockgen from inside the module that holds the spec", t.dir, firstLine(msg))
		}
	}
	t.path = p.PkgPath
	if t.path == "" || strings.HasPrefix(t.path, "/") || strings.HasPrefix(t.path, "_") {
		return errors.New("cannot determine the import path of " + t.dir + " (is it inside a Go module?)")
	}
	return nil
}

var foundRE = regexp.MustCompile(`found packages (\S+) \(.*\) and (\S+) \(`)

// resolveParam checks that a user type exists and can be a key, and
// records how its values are rendered.
func resolveParam(l *Lock, p *Param, pkg *packages.Package, e *errs) {
	path := "locks." + l.Name + ".params." + p.Name
	t := p.Type
	if pkg == nil || pkg.Types == nil || pkg.Name == "" {
		why := "not found"
		if pkg != nil && len(pkg.Errors) > 0 {
			why = firstLine(pkg.Errors[0].Msg)
			if i := strings.Index(why, ";"); i > 0 {
				why = why[:i]
			}
		}
		e.add(p.Pos, path, "cannot load package %q: %s (check the import path; go get it when it is another module)", t.Path, why)
		return
	}
	obj := pkg.Types.Scope().Lookup(t.Name)
	tn, ok := obj.(*types.TypeName)
	if !ok {
		fix := "check the name"
		if sug := suggest(t.Name, exportedTypes(pkg.Types)); sug != "" {
			fix = "did you mean " + t.Path + "." + sug + "?"
		}
		e.add(p.Pos, path, "package %s has no type %s (%s)", t.Path, t.Name, fix)
		return
	}
	typ := tn.Type()
	if isTimeTime(typ) { // also under an alias: type Instant = time.Time
		// Neither text is one per instant: String() adds the monotonic
		// clock reading and the zone name, MarshalText() the zone offset,
		// so t.Equal(u) would not mean one key.
		name := "time.Time"
		if t.Path != "time" || t.Name != "Time" {
			name = t.String() + " (an alias of time.Time)"
		}
		e.add(p.Pos, path, "%s cannot be a key param: equal instants render different text (String() adds the zone and the monotonic clock reading, MarshalText() the zone offset) (pass %s.UTC().Unix() as an int64 param, or a string param formatted in UTC)", name, p.Name)
		return
	}
	if n, ok := typ.(*types.Named); ok && n.TypeParams().Len() > 0 {
		e.add(p.Pos, path, "%s is generic (use an instantiated named type, or a basic type)", t)
		return
	}
	p.Type.pkgName = pkg.Name
	if b, ok := typ.Underlying().(*types.Basic); ok {
		info := b.Info()
		switch {
		case info&types.IsString != 0:
			p.Type.render = templates.RenderString
			return
		case info&types.IsInteger != 0 && info&types.IsUnsigned != 0:
			p.Type.render = templates.RenderUint
			if b.Kind() == types.Uintptr {
				break
			}
			return
		case info&types.IsInteger != 0:
			p.Type.render = templates.RenderInt
			return
		case info&types.IsBoolean != 0:
			p.Type.render = templates.RenderBool
			return
		}
	}
	if types.IsInterface(typ) {
		// Like any and error: its text is unknown until run time, and a
		// nil value would panic in the generated key function.
		e.add(p.Pos, path, "%s cannot be a key param: it is an interface, so its text is unknown until run time and a nil value has none (use a concrete type)", t)
		return
	}
	if _, ok := typ.Underlying().(*types.Pointer); ok {
		e.add(p.Pos, path, "%s cannot be a key param: it is a pointer (%s), and a nil one panics in the generated key function (use the type it points to)", t, types.Unalias(typ))
		return
	}
	for _, m := range []struct {
		name    string
		results *types.Tuple
		render  templates.Render
	}{{"String", stringResult, templates.RenderStringer}, {"MarshalText", textResults, templates.RenderText}} {
		f, indirect := method(typ, m.name, m.results)
		if f == nil {
			continue
		}
		if why := borrowed(f, indirect); why != "" {
			e.add(p.Pos, path, "%s cannot be a key param: its %s method %s (declare %s on %s itself, or use a basic type)", t, m.name, why, m.name, t.Name)
			return
		}
		p.Type.render = m.render
		return
	}
	e.add(p.Pos, path, "%s cannot be a key param: its underlying type is %s (give it a string or integer underlying type, or a String() string or MarshalText method)", t, typ.Underlying())
}

// The results of String() string and MarshalText() ([]byte, error).
var (
	stringResult = types.NewTuple(types.NewVar(0, nil, "", types.Typ[types.String]))
	textResults  = types.NewTuple(
		types.NewVar(0, nil, "", types.NewSlice(types.Typ[types.Byte])),
		types.NewVar(0, nil, "", types.Universe.Lookup("error").Type()))
)

// method is the method name of t that a call on an addressable t selects
// (so pointer methods count), when it has no parameters and the given
// results (compared as types, so named results like (s string) match);
// indirect reports a pointer on the way to it (an embedded *T).
func method(t types.Type, name string, results *types.Tuple) (f *types.Func, indirect bool) {
	obj, _, indirect := types.LookupFieldOrMethod(t, true, nil, name)
	f, ok := obj.(*types.Func)
	if !ok {
		return nil, false
	}
	sig := f.Type().(*types.Signature)
	if sig.Params().Len() != 0 || sig.Variadic() || sig.Results().Len() != results.Len() {
		return nil, false
	}
	for i := 0; i < results.Len(); i++ {
		if !types.Identical(sig.Results().At(i).Type(), results.At(i).Type()) {
			return nil, false
		}
	}
	return f, indirect
}

// borrowed says why a method selected on a key type does not give it one
// text per value, "" when it does: it is time.Time's (promoted from an
// embedded time.Time: see isTimeTime), an embedded interface's (unknown
// until run time, nil has none), or reached through an embedded pointer
// (a nil one panics in the generated key function).
func borrowed(f *types.Func, indirect bool) string {
	recv := f.Type().(*types.Signature).Recv()
	switch {
	case f.Pkg() != nil && f.Pkg().Path() == "time":
		return "is time.Time's, promoted from an embedded time.Time: equal instants render different text"
	case recv != nil && types.IsInterface(recv.Type()):
		return "comes from an embedded interface: its text is unknown until run time, and a nil one has none"
	case indirect:
		return "is reached through an embedded pointer: a nil one panics in the generated key function"
	}
	return ""
}

// isTimeTime reports whether t is time.Time, under any alias.
func isTimeTime(t types.Type) bool {
	n, ok := types.Unalias(t).(*types.Named)
	return ok && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == "time" && n.Obj().Name() == "Time"
}

func exportedTypes(p *types.Package) []string {
	var names []string
	for _, n := range p.Scope().Names() {
		if _, ok := p.Scope().Lookup(n).(*types.TypeName); ok && isExported(n) {
			names = append(names, n)
		}
	}
	return names
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
