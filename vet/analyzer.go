package vet

import (
	"go/ast"
	"go/token"
	"go/types"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/tools/go/analysis"
)

// Analyzer is the lockgen analyzer: lock-order inversions, locks taken
// with the wrong ctx inside a critical section, hold ctxs escaping it, and
// Unlocks with a ctx no Lock returned. See the package doc.
var Analyzer = &analysis.Analyzer{
	Name:       "lockgen",
	Doc:        "report lock-order inversions and misused hold contexts in code that uses lockgen's generated locks\n\nSee https://pkg.go.dev/github.com/lockgen/lockgen/vet for every check, how to silence one (//lockgen:ignore reason) and what it cannot see.",
	URL:        "https://pkg.go.dev/github.com/lockgen/lockgen/vet",
	Run:        run,
	FactTypes:  []analysis.Fact{new(lockMethod), new(acquires), new(Order)},
	ResultType: reflect.TypeFor[*Order](),
}

func run(pass *analysis.Pass) (any, error) {
	if pass.TypesInfo == nil {
		// A dependency loaded from export data (lockgen vet loads only
		// the packages that import the runtime from source): it takes
		// no lock.
		return (*Order)(nil), nil
	}
	exportLockMethods(pass)
	ign := collectIgnores(pass)
	r := &resolver{pass: pass, defs: collectDefs(pass.TypesInfo, pass.Files)}
	w := &walker{pass: pass, r: r, ign: ign, sums: make(map[*types.Func]map[string]Acq),
		nestedAt: make(map[token.Pos]bool), positions: &positions{fset: pass.Fset}}
	w.summarize()

	w.report = true
	w.funcs(func(fd *ast.FuncDecl, fn *types.Func) { w.walkFunc(fd, fd.Body) })
	w.pkgFuncLits(func(lit *ast.FuncLit) { w.walkFunc(nil, lit.Body) })
	for fn, s := range w.sums {
		if len(s) == 0 || !fn.Exported() {
			continue
		}
		acqs := make([]Acq, 0, len(s))
		for _, a := range s {
			acqs = append(acqs, a)
		}
		pass.ExportObjectFact(fn, &acquires{Acqs: sortAcqs(acqs)})
	}

	local := sortEdges(w.edges)
	imported := make(map[string]*Order)
	all := append([]Edge(nil), local...)
	for _, imp := range pass.Pkg.Imports() {
		var o Order
		if pass.ImportPackageFact(imp, &o) && len(o.Edges) > 0 {
			imported[imp.Path()] = &o
			all = append(all, o.Edges...)
		}
	}
	all = sortEdges(all)
	order := &Order{Edges: all}
	if len(all) > 0 {
		pass.ExportPackageFact(order)
	}

	isLocal := make(map[string]bool, len(local))
	for _, e := range local {
		isLocal[e.key()] = true
	}
	reported := make(map[Posn]bool)
	for _, inv := range Inversions(all, func(e Edge) bool { return isLocal[e.key()] }) {
		if !reported[inv.At.At] {
			reported[inv.At.At] = true
			pass.Report(inv.Diagnostic(pass.Fset, tokenPos(pass, inv.At.At)))
		}
	}
	reportClosedHere(pass, ign, all, isLocal, imported)
	return order, nil
}

// reportClosedHere reports a cycle whose edges all lie in imported
// packages but that no single import sees whole: this package is the
// first to put its sides together (a main that links two services, say).
// It is reported at the import that brings in the first edge; lockgen vet
// reports such cycles at every edge instead.
func reportClosedHere(pass *analysis.Pass, ign *ignores, all []Edge, isLocal map[string]bool, imported map[string]*Order) {
	paths := make([]string, 0, len(imported))
	for p := range imported {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	has := func(o *Order, e Edge) bool {
		i := sort.Search(len(o.Edges), func(i int) bool { return o.Edges[i].key() >= e.key() })
		return i < len(o.Edges) && o.Edges[i].key() == e.key()
	}
	seen := make(map[string]bool)
	for _, inv := range Inversions(all, func(e Edge) bool { return !isLocal[e.key()] }) {
		cycle := append([]Edge{inv.At}, inv.Back...)
		keys := make([]string, len(cycle))
		for i, e := range cycle {
			if isLocal[e.key()] {
				keys = nil
				break
			}
			keys[i] = e.key()
		}
		if keys == nil {
			continue
		}
		sort.Strings(keys)
		id := ""
		for _, k := range keys {
			id += k + "|"
		}
		if seen[id] {
			continue
		}
		seen[id] = true
		whole, first := false, ""
		for _, p := range paths {
			all := true
			for _, e := range cycle {
				if !has(imported[p], e) {
					all = false
				} else if first == "" && e == inv.At {
					first = p
				}
			}
			whole = whole || all
		}
		if whole || first == "" {
			continue
		}
		if spec := importSpec(pass, first); spec != nil && !ign.covers(pass.Fset, spec.Pos()) {
			d := inv.Diagnostic(pass.Fset, spec.Pos())
			d.Category = "lockorder-imports"
			// The finding is at the import, so the edge it is about is a note too.
			edge := (&positions{fset: pass.Fset}).related(spec.Pos(), []Note{{inv.At.At, display(inv.At.To) + " is taken while " + display(inv.At.From) + " is held"}})
			d.Related = slices.Insert(d.Related, 1, edge...)
			d.Message = strings.Replace(d.Message, "lock-order inversion:", "lock-order inversion in imported packages that this package links:", 1)
			pass.Report(d)
		}
	}
}

func importSpec(pass *analysis.Pass, path string) *ast.ImportSpec {
	for _, f := range pass.Files {
		for _, s := range f.Imports {
			if p, err := strconv.Unquote(s.Path.Value); err == nil && p == path {
				return s
			}
		}
	}
	return nil
}

// tokenPos finds p in the pass's files (it is always one of them: only a
// local edge is reported at its position).
func tokenPos(pass *analysis.Pass, p Posn) token.Pos {
	for _, f := range pass.Files {
		if tf := pass.Fset.File(f.Pos()); tf != nil && tf.Name() == p.File && p.Line <= tf.LineCount() {
			return tf.LineStart(p.Line) + token.Pos(p.Col-1)
		}
	}
	return token.NoPos
}

func sortAcqs(as []Acq) []Acq {
	sort.Slice(as, func(i, j int) bool {
		if as[i].Lock != as[j].Lock {
			return as[i].Lock < as[j].Lock
		}
		return as[i].sumKey() < as[j].sumKey()
	})
	return as
}
