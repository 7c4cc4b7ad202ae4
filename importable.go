package lockgen

import (
	"fmt"
	"go/build"
	goparser "go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/tools/go/packages"
)

// checkImportable refuses param types whose package the generated file
// cannot import: a program (package main), a package internal to another
// tree, or one that imports the output package (an import cycle). The go
// command would only say so when the generated code is built.
func checkImportable(s *Spec, t target, byPath map[string]*packages.Package, e *errs) {
	cycles := importersOf(t.path, byPath)
	checked := map[string]bool{} // a package is checked (its test files read) once, and reported at its first param
	for _, l := range s.Locks {
		for _, p := range l.Params {
			pkg := byPath[p.Type.Path]
			if p.Type.Path == "" || pkg == nil || pkg.Types == nil || checked[p.Type.Path] {
				continue
			}
			checked[p.Type.Path] = true
			why := importProblem(pkg, t.path, cycles[p.Type.Path])
			if why == "" {
				why = testImportProblem(pkg, t.path, cycles)
			}
			if why != "" {
				e.add(p.Pos, "locks."+l.Name+".params."+p.Name, "%s cannot be a key param: %s", p.Type, why)
			}
		}
	}
}

// importProblem says why package pkg cannot be imported by package from,
// or "" when it can.
func importProblem(pkg *packages.Package, from string, cycle bool) string {
	path := pkg.PkgPath
	switch {
	case pkg.Name == "main":
		return fmt.Sprintf("%s is a program (package main), which no package can import (move the type to a library package)", path)
	case !internalAllowed(path, from):
		return fmt.Sprintf("%s is an internal package that the output package %s may not import (move the type out of internal/, or the output under %s)", path, from, internalRoot(path))
	case cycle:
		return fmt.Sprintf("%s imports the output package %s, so the generated import would be a cycle (move the type to a package that does not import %s, or generate into another package)", path, from, from)
	}
	return ""
}

// internalRoot is the tree whose packages may import path: the part
// before its last "internal" element ("" for the standard library's
// internal/...), or path itself when it has none.
func internalRoot(path string) string {
	elems := strings.Split(path, "/")
	for i := len(elems) - 1; i >= 0; i-- {
		if elems[i] == "internal" {
			return strings.Join(elems[:i], "/")
		}
	}
	return path
}

// internalAllowed applies the go command's internal rule: a package
// .../a/internal/... may be imported only from within .../a.
func internalAllowed(path, from string) bool {
	root := internalRoot(path)
	if root == path {
		return true
	}
	return root != "" && (from == root || strings.HasPrefix(from, root+"/"))
}

// importersOf reports which of the packages in byPath, and of their
// dependencies, import package out, directly or not, from the import
// graph their load gave (the go command
// lists every dependency to type-check them, so it costs no second load).
func importersOf(out string, byPath map[string]*packages.Package) map[string]bool {
	reaches := map[string]bool{} // package path -> imports out
	var visit func(p *packages.Package) bool
	visit = func(p *packages.Package) bool {
		if r, done := reaches[p.PkgPath]; done {
			return r
		}
		reaches[p.PkgPath] = false // a cycle among the deps is the go command's to report
		for _, imp := range p.Imports {
			if imp.PkgPath == out || visit(imp) {
				reaches[p.PkgPath] = true
				return true
			}
		}
		return false
	}
	for path, p := range byPath {
		if p.Types != nil && path != out {
			visit(p)
		}
	}
	return reaches
}

// testImportProblem says why the tests of package pkg would no longer
// build once the output package from imports pkg, or "" when they would:
// a test file inside pkg (package pkg, not pkg_test) that imports from,
// directly or through a package of the load's import graph (cycles), puts
// from's import of pkg in a cycle that `go test` refuses. Test files are
// not part of the load (the generated code does not build them), so their
// imports are read here.
func testImportProblem(pkg *packages.Package, from string, cycles map[string]bool) string {
	if len(pkg.GoFiles) == 0 {
		return ""
	}
	dir := filepath.Dir(pkg.GoFiles[0])
	entries, err := os.ReadDir(dir)
	if err != nil {
		return ""
	}
	for _, ent := range entries {
		name := ent.Name()
		if ent.IsDir() || !strings.HasSuffix(name, "_test.go") {
			continue
		}
		if ok, err := build.Default.MatchFile(dir, name); err != nil || !ok {
			continue // not built here (build constraints)
		}
		f, err := goparser.ParseFile(token.NewFileSet(), filepath.Join(dir, name), nil, goparser.ImportsOnly)
		if err != nil || f.Name.Name != pkg.Name {
			continue // the go command reports a broken file; an external test (pkg_test) may import from
		}
		for _, imp := range f.Imports {
			path, err := strconv.Unquote(imp.Path.Value)
			if err == nil && (path == from || cycles[path]) {
				return fmt.Sprintf("the test file %s of %s is in the package (%s, not %s_test) and imports %s, so its tests would no longer build once the generated file imports %s: an import cycle (move that test to package %s_test, or generate into another package)",
					name, pkg.PkgPath, pkg.Name, pkg.Name, importChain(path, from), pkg.Name, pkg.Name)
			}
		}
	}
	return ""
}

// importChain names the import of a test file that leads to the output
// package from.
func importChain(path, from string) string {
	if path == from {
		return "the output package " + from
	}
	return path + ", which imports the output package " + from
}
