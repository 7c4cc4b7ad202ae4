package lockgen

import (
	"fmt"
	"go/ast"
	"go/build/constraint"
	goparser "go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// decl is a name declared by a Go file: at package level (func, type, var,
// const), in the file block (import), or in the method set of a type
// (method, field).
type decl struct {
	name string
	kind string // "func", "type", "var", "const", "import", "method", "field"
	recv string // method, field: the type it belongs to
	path string // import: the imported path
	file string // absolute path of the declaring file
	pos  token.Position
	gen  bool // the declaring file starts with lockgen's header
}

func (d decl) String() string {
	switch d.kind {
	case "method", "field":
		return d.kind + " " + d.recv + "." + d.name
	case "import":
		return "import of package " + d.name
	}
	return d.kind + " " + d.name
}

// fileDecls lists what one parsed file declares.
func fileDecls(fset *token.FileSet, f *ast.File, file string, gen bool) (pkg, imports, members []decl) {
	at := func(n ast.Node) token.Position { return fset.Position(n.Pos()) }
	mk := func(id *ast.Ident, kind string) decl {
		return decl{name: id.Name, kind: kind, file: file, pos: at(id), gen: gen}
	}
	for _, im := range f.Imports {
		p, err := strconv.Unquote(im.Path.Value)
		if err != nil {
			continue
		}
		d := decl{name: path.Base(p), kind: "import", path: p, file: file, pos: at(im), gen: gen}
		if im.Name != nil {
			d.name = im.Name.Name
		}
		if d.name == "_" || d.name == "." {
			continue
		}
		imports = append(imports, d)
	}
	for _, dl := range f.Decls {
		switch dl := dl.(type) {
		case *ast.FuncDecl:
			if dl.Recv == nil {
				if dl.Name.Name != "init" && dl.Name.Name != "_" {
					pkg = append(pkg, mk(dl.Name, "func"))
				}
				continue
			}
			if len(dl.Recv.List) == 1 {
				if recv := recvName(dl.Recv.List[0].Type); recv != "" {
					d := mk(dl.Name, "method")
					d.recv = recv
					members = append(members, d)
				}
			}
		case *ast.GenDecl:
			for _, sp := range dl.Specs {
				switch sp := sp.(type) {
				case *ast.TypeSpec:
					pkg = append(pkg, mk(sp.Name, "type"))
					if st, ok := sp.Type.(*ast.StructType); ok {
						for _, fl := range st.Fields.List {
							for _, n := range fl.Names {
								d := mk(n, "field")
								d.recv = sp.Name.Name
								members = append(members, d)
							}
						}
					}
				case *ast.ValueSpec:
					kind := "var"
					if dl.Tok == token.CONST {
						kind = "const"
					}
					for _, n := range sp.Names {
						if n.Name != "_" {
							pkg = append(pkg, mk(n, kind))
						}
					}
				}
			}
		}
	}
	return pkg, imports, members
}

// recvName is the type name of a method receiver: T, *T, T[P], *T[P].
func recvName(x ast.Expr) string {
	for {
		switch t := x.(type) {
		case *ast.StarExpr:
			x = t.X
		case *ast.ParenExpr:
			x = t.X
		case *ast.IndexExpr:
			x = t.X
		case *ast.IndexListExpr:
			x = t.X
		case *ast.Ident:
			return t.Name
		default:
			return ""
		}
	}
}

// pkgFile is a file of the output package other than the output file.
type pkgFile struct {
	path string
	ast  *ast.File
	gen  bool // starts with lockgen's header
}

// packageFiles parses the Go files of package pkg in dir, except outFile,
// files of other packages (an external test package) and files excluded
// by //go:build ignore. Files of any other build constraint count: they
// are part of the package on some platform.
func packageFiles(fset *token.FileSet, dir, outFile, pkg string) []pkgFile {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil // the directory does not exist yet
	}
	var out []pkgFile
	for _, ent := range entries {
		name := ent.Name()
		file := filepath.Join(dir, name)
		if ent.IsDir() || !strings.HasSuffix(name, ".go") || file == outFile || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
			continue
		}
		src, err := os.ReadFile(file)
		if err != nil {
			continue
		}
		f, _ := goparser.ParseFile(fset, file, src, goparser.SkipObjectResolution|goparser.ParseComments)
		if f == nil || f.Name == nil || f.Name.Name != pkg || ignored(f) {
			continue
		}
		out = append(out, pkgFile{path: file, ast: f, gen: isGenerated(src)})
	}
	return out
}

// hasPackageDoc reports whether a non-test file among files has a package
// doc comment, which go doc shows before the generated one.
func hasPackageDoc(files []pkgFile) bool {
	for _, f := range files {
		if f.ast.Doc != nil && !strings.HasSuffix(f.path, "_test.go") {
			return true
		}
	}
	return false
}

// checkCollisions reports every name the generated file src declares that
// another file of the output package declares too: the build of the
// package would fail on it after generation. Each error points at the part
// of the spec that produces the name and names the other declaration's
// place.
func checkCollisions(s *Spec, fset *token.FileSet, files []pkgFile, outFile string, src []byte, e *errs) {
	gf, err := goparser.ParseFile(fset, outFile, src, goparser.SkipObjectResolution)
	if err != nil {
		return // the templates produced invalid Go; Emit reports that
	}
	genPkg, genImports, genMembers := fileDecls(fset, gf, outFile, true)

	otherPkg := map[string][]decl{}
	otherImports := map[string][]decl{}
	otherMembers := map[string][]decl{} // by recv + "." + name
	for _, f := range files {
		pkg, imports, members := fileDecls(fset, f.ast, f.path, f.gen)
		for _, d := range pkg {
			otherPkg[d.name] = append(otherPkg[d.name], d)
		}
		for _, d := range imports {
			otherImports[d.name] = append(otherImports[d.name], d)
		}
		for _, d := range members {
			otherMembers[d.recv+"."+d.name] = append(otherMembers[d.recv+"."+d.name], d)
		}
	}

	// Another file that lockgen generated is reported once, whatever it
	// shares with this one: most likely this spec's output before the
	// output field changed.
	stale := map[string][]string{}
	var staleFiles []string
	clash := func(g, o decl) {
		if !o.gen {
			collision(s, g, o, e)
			return
		}
		if stale[o.file] == nil {
			staleFiles = append(staleFiles, o.file)
		}
		stale[o.file] = append(stale[o.file], o.name)
	}
	clashingTypes := map[string]bool{}
	for _, g := range genPkg {
		for _, o := range append(otherPkg[g.name], otherImports[g.name]...) {
			if g.kind == "type" {
				clashingTypes[g.name] = true
			}
			clash(g, o)
		}
	}
	for _, g := range genImports {
		for _, o := range otherPkg[g.name] {
			clash(g, o)
		}
	}
	for _, g := range genMembers {
		if clashingTypes[g.recv] {
			continue // the type itself collides: its methods would only repeat it
		}
		for _, o := range otherMembers[g.recv+"."+g.name] {
			clash(g, o)
		}
	}
	for _, f := range staleFiles {
		at, where, _ := s.producer(decl{})
		e.add(at, where, "%s was generated by lockgen too and declares %s, as this spec's output would (if it is this spec's old output, from before output changed, delete it; otherwise generate into another package: two specs cannot share one)",
			s.relToSpec(f), andList(stale[f]))
	}
}

// andList joins names as prose: "a", "a and b", "a, b and c".
func andList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// ignored reports whether f is excluded from every build by the
// //go:build ignore convention.
func ignored(f *ast.File) bool {
	for _, cg := range f.Comments {
		if cg.Pos() > f.Package {
			break
		}
		for _, c := range cg.List {
			if !constraint.IsGoBuild(c.Text) {
				continue
			}
			expr, err := constraint.Parse(c.Text)
			if err == nil && expr.String() == "ignore" {
				return true
			}
		}
	}
	return false
}

// collision reports that generated declaration g clashes with o.
func collision(s *Spec, g, o decl, e *errs) {
	at, where, fix := s.producer(g)
	other := fmt.Sprintf("%s:%d:%d", s.relToSpec(o.file), o.pos.Line, o.pos.Column)
	what := "the generated " + g.String()
	if g.kind == "import" {
		what = "the generated file imports package " + g.name + ", which"
	}
	e.add(at, where, "%s collides with the %s declared at %s (%s)", what, o, other, fix)
}

// producer is the place in the spec that makes the generated declaration
// g, and how to resolve a clash there.
func (s *Spec) producer(g decl) (Pos, string, string) {
	const pkgFix = "rename that declaration, or generate into another package with output:"
	for _, l := range s.Locks {
		lockFix := "rename the lock " + l.Name + ", or that declaration"
		switch g.kind {
		case "method":
			for _, m := range methodNames(l) {
				if g.recv == "Locks" && g.name == m {
					return l.Pos, "locks." + l.Name, lockFix
				}
			}
		case "func", "var":
			if g.name == lowerFirst(l.Name)+"Key" || g.name == lowerFirst(l.Name)+"Options" {
				return l.Pos, "locks." + l.Name, lockFix
			}
		case "import":
			for _, p := range l.Params {
				if p.Type.Path == g.path {
					return p.Pos, "locks." + l.Name + ".params." + p.Name, "rename that declaration, or name the param's type from another package"
				}
			}
		}
	}
	at := s.packagePos
	if at.Line == 0 {
		at = s.firstPos
	}
	return at, "package", pkgFix
}
