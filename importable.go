package lockgen

import (
	"fmt"
	"strings"

	"golang.org/x/tools/go/packages"
)

// checkImportable refuses param types whose package the generated file
// cannot import: a program (package main), a package internal to another
// tree, or one that imports the output package (an import cycle). The go
// command would only say so when the generated code is built.
func checkImportable(s *Spec, t target, byPath map[string]*packages.Package, e *errs) {
	cycles := importersOf(t.path, byPath)
	reported := map[string]bool{}
	for _, l := range s.Locks {
		for _, p := range l.Params {
			pkg := byPath[p.Type.Path]
			if p.Type.Path == "" || pkg == nil || pkg.Types == nil || reported[p.Type.Path] {
				continue
			}
			why := importProblem(pkg, t.path, cycles[p.Type.Path])
			if why != "" {
				reported[p.Type.Path] = true
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

// importersOf reports which of the packages in byPath import package out,
// directly or not, from the import graph their load gave (the go command
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
	cycles := map[string]bool{}
	for path, p := range byPath {
		if p.Types != nil && path != out {
			cycles[path] = visit(p)
		}
	}
	return cycles
}
