package main

import (
	"errors"
	"flag"
	"fmt"
	"go/token"
	"io"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/checker"
	"golang.org/x/tools/go/analysis/unitchecker"
	"golang.org/x/tools/go/packages"

	"github.com/lockgen/lockgen/vet"
)

// runVet runs the lockgen analyzer (package vet) on the packages the
// patterns name, as go vet would, and then reports every lock-order cycle
// among all of them at each of its edges, which go vet, one package at a
// time, cannot.
func runVet(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("vet")
	asJSON := fs.Bool("json", false, "print the findings as JSON in go/analysis's format on stdout (and exit 0 when the packages load)")
	tests := fs.Bool("test", false, "analyse the packages' test files too (go vet does)")
	switch err := fs.Parse(args); {
	case errors.Is(err, flag.ErrHelp):
		commandUsage(fs, stdout)
		return exitOK
	case err != nil:
		fmt.Fprintf(stderr, "%s: %s\nrun '%s -h' for its flags\n", fs.Name(), flagError(fs, err), fs.Name())
		return exitUsage
	}
	patterns := fs.Args()
	if len(patterns) == 0 {
		patterns = []string{"."}
	}
	pkgs, err := loadForVet(patterns, *tests)
	if err != nil {
		fmt.Fprintln(stderr, "lockgen vet:", loadErrorText(err))
		return exitFail
	}
	if printLoadErrors(pkgs, stderr) {
		return exitFail
	}
	failed := false
	graph, err := checker.Analyze([]*analysis.Analyzer{vet.Analyzer}, pkgs, nil)
	if err != nil {
		fmt.Fprintln(stderr, "lockgen vet:", err)
		return exitFail
	}
	reportLinkedCycles(graph.Roots)
	for _, act := range graph.Roots {
		if act.Err != nil {
			fmt.Fprintf(stderr, "lockgen vet: %s: %v\n", act.Package.PkgPath, act.Err)
			failed = true
		}
	}
	if *asJSON {
		if err := graph.PrintJSON(stdout); err != nil {
			fmt.Fprintln(stderr, "lockgen vet:", err)
			return exitFail
		}
		if failed {
			return exitFail
		}
		return exitOK
	}
	if printFindings(graph.Roots, stderr) > 0 || failed {
		return exitFail
	}
	return exitOK
}

// printLoadErrors prints the errors of the packages and their
// dependencies, each once, as the go command prints them: file:line:col:
// message, the file relative to the working directory, or the message
// alone when it has no position (not "-: message"). go list's compile
// output for a package ("# pkg", then the compiler's lines) repeats its
// type errors and is left out when it has any. It reports whether there
// were errors.
func printLoadErrors(pkgs []*packages.Package, w io.Writer) bool {
	seen := make(map[string]bool)
	packages.Visit(pkgs, nil, func(p *packages.Package) {
		typed := slices.ContainsFunc(p.Errors, func(e packages.Error) bool { return e.Kind != packages.ListError })
		for _, e := range p.Errors {
			if typed && e.Kind == packages.ListError && strings.HasPrefix(e.Msg, "# ") {
				continue
			}
			line := e.Msg
			if e.Pos != "" && e.Pos != "-" {
				line = relPos(e.Pos) + ": " + e.Msg
			}
			if !seen[line] {
				seen[line] = true
				fmt.Fprintln(w, line)
			}
		}
	})
	return len(seen) > 0
}

// loadErrorText is err as the go command prints it: a go list error
// without a position (vet a.go ./pkg: "named files must be .go files")
// is its message alone, not "-: message".
func loadErrorText(err error) string {
	var e packages.Error
	if !errors.As(err, &e) {
		return err.Error()
	}
	if e.Pos == "" || e.Pos == "-" {
		return e.Msg
	}
	return relPos(e.Pos) + ": " + e.Msg
}

// relPos is a file:line:col (or file:line, or file) position with the
// file relative to the working directory when it lies below it.
func relPos(pos string) string {
	file, rest := pos, ""
	for range 2 {
		i := strings.LastIndexByte(file, ':')
		if i < 0 || strings.Trim(file[i+1:], "0123456789") != "" {
			break
		}
		file, rest = file[:i], file[i:]+rest
	}
	return relPath(file) + rest
}

// loadForVet loads the packages the patterns name for the analyzer. Only a
// package that imports lockgen's runtime, directly or not, can take a
// generated lock or carry the analyzer's facts, so only those are
// type-checked from source (the named ones and their dependencies that
// import the runtime); every other dependency (the standard library,
// go-redis, ...) comes from the go command's export data, which its build
// cache keeps. go/analysis drivers load everything from source
// (packages.LoadAllSyntax): lockgen vet -test ./... on this repository
// took three times the CPU and four times the memory that way (11 s and
// 870 MB against 3.6 s and 200 MB).
//
// Named .go files are one ad-hoc package, and go list takes no import
// path beside them: then every dependency is loaded from source.
func loadForVet(patterns []string, tests bool) ([]*packages.Package, error) {
	if slices.ContainsFunc(patterns, func(p string) bool { return strings.HasSuffix(p, ".go") }) {
		return packages.Load(&packages.Config{Mode: packages.LoadSyntax | packages.NeedDeps, Tests: tests}, patterns...)
	}
	graph, err := packages.Load(&packages.Config{Mode: packages.NeedName | packages.NeedImports | packages.NeedDeps, Tests: tests}, patterns...)
	if err != nil {
		return nil, err
	}
	asked := make(map[string]bool, len(graph)) // the PkgPaths the patterns name, test variants included
	for _, p := range graph {
		asked[p.PkgPath] = true
	}
	named := maps.Clone(asked)
	uses := make(map[*packages.Package]bool)
	var usesRuntime func(p *packages.Package) bool
	usesRuntime = func(p *packages.Package) bool {
		u, done := uses[p]
		if done {
			return u
		}
		uses[p] = false // an import cycle is an error the second load reports
		u = p.PkgPath == vet.RuntimePath
		for _, imp := range p.Imports {
			u = usesRuntime(imp) || u
		}
		uses[p] = u
		return u
	}
	var deps []string
	packages.Visit(graph, nil, func(p *packages.Package) {
		if usesRuntime(p) && !named[p.PkgPath] && p.PkgPath != vet.RuntimePath {
			named[p.PkgPath] = true
			deps = append(deps, p.PkgPath)
		}
	})
	pkgs, err := packages.Load(&packages.Config{Mode: packages.LoadSyntax, Tests: tests}, append(patterns, deps...)...)
	if err != nil || len(deps) == 0 {
		return pkgs, err
	}
	// The dependencies were named only to be loaded from source: their
	// findings are not asked for.
	roots := pkgs[:0]
	for _, p := range pkgs {
		if asked[p.PkgPath] {
			roots = append(roots, p)
		}
	}
	return roots, nil
}

// reportLinkedCycles adds, to the package that owns it, a finding at every
// edge of a lock-order cycle that its own analysis could not see: the
// other side is in a package it does not import (two services that share
// a repository and their locks, but no code).
func reportLinkedCycles(roots []*checker.Action) {
	owner := make(map[string]*checker.Action) // file name -> root that holds it
	reported := make(map[token.Position]bool)
	var all []vet.Edge
	for _, act := range roots {
		for _, f := range act.Package.Syntax {
			owner[act.Package.Fset.File(f.Pos()).Name()] = act
		}
		for _, d := range act.Diagnostics {
			if d.Category == "lockorder" {
				reported[act.Package.Fset.Position(d.Pos)] = true
			}
		}
		if o, ok := act.Result.(*vet.Order); ok && o != nil {
			all = append(all, o.Edges...)
		}
	}
	sort.Slice(all, func(i, j int) bool { return edgeLess(all[i], all[j]) })
	seen := make(map[vet.Posn]bool)
	for _, inv := range vet.Inversions(all, func(e vet.Edge) bool { return owner[e.At.File] != nil }) {
		if seen[inv.At.At] {
			continue
		}
		seen[inv.At.At] = true
		act := owner[inv.At.At.File]
		pos := tokenPos(act, inv.At.At)
		if !pos.IsValid() || reported[act.Package.Fset.Position(pos)] {
			continue
		}
		act.Diagnostics = append(act.Diagnostics, inv.Diagnostic(act.Package.Fset, pos))
	}
}

func edgeLess(a, b vet.Edge) bool {
	if a.At != b.At {
		return a.At.File < b.At.File || a.At.File == b.At.File && (a.At.Line < b.At.Line || a.At.Line == b.At.Line && a.At.Col < b.At.Col)
	}
	return a.From+">"+a.To < b.From+">"+b.To
}

func tokenPos(act *checker.Action, p vet.Posn) token.Pos {
	for _, f := range act.Package.Syntax {
		if tf := act.Package.Fset.File(f.Pos()); tf != nil && tf.Name() == p.File && p.Line <= tf.LineCount() {
			return tf.LineStart(p.Line) + token.Pos(p.Col-1)
		}
	}
	return token.NoPos
}

// printFindings prints the roots' findings as go vet prints them,
// file:line:col: message, sorted by position, each followed by its
// related positions (the detail), one a line, the message indented by a
// tab; and returns how many.
func printFindings(roots []*checker.Action, w io.Writer) int {
	type finding struct {
		pos     token.Position
		msg     string
		related string
	}
	var all []finding
	seen := make(map[finding]bool)
	for _, act := range roots {
		for _, d := range act.Diagnostics {
			f := finding{pos: act.Package.Fset.Position(d.Pos), msg: d.Message}
			for _, r := range d.Related {
				p := act.Package.Fset.Position(r.Pos)
				f.related += fmt.Sprintf("%s: \t%s\n", posText(p), r.Message)
			}
			if !seen[f] {
				seen[f] = true
				all = append(all, f)
			}
		}
	}
	sort.Slice(all, func(i, j int) bool {
		a, b := all[i].pos, all[j].pos
		if a.Filename != b.Filename {
			return a.Filename < b.Filename
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
	for _, f := range all {
		fmt.Fprintf(w, "%s: %s\n%s", posText(f.pos), f.msg, f.related)
	}
	return len(all)
}

// posText is p as file:line:col, the file relative to the working
// directory; file:line when the column is unknown (0: a //line file:N
// directive gives none), as the go command prints it.
func posText(p token.Position) string {
	if p.Column == 0 {
		return fmt.Sprintf("%s:%d", relPath(p.Filename), p.Line)
	}
	return fmt.Sprintf("%s:%d:%d", relPath(p.Filename), p.Line, p.Column)
}

// vetTool reports whether go vet runs lockgen as its -vettool: it asks
// for the tool's version (-V=full) and flags (-flags), then passes one
// vet.cfg file per package.
func vetTool(args []string) bool {
	if len(args) == 0 {
		return false
	}
	return args[0] == "-V=full" || args[0] == "-flags" || strings.HasSuffix(args[len(args)-1], ".cfg")
}

// runVetTool hands the process to unitchecker, go vet's protocol; it exits.
func runVetTool() {
	unitchecker.Main(vet.Analyzer)
	os.Exit(exitFail) // not reached: unitchecker.Main exits
}
