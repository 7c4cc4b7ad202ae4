package vet

import (
	"go/ast"
	"go/types"
	"slices"

	"golang.org/x/tools/go/types/typeutil"
)

// releasesThrough ends the spans (for the nested check) that the call c
// releases: a call of a closure (a variable assigned a func literal once)
// ends those its Unlocks would; a call of a function of this package
// whose body Unlocks one of its parameters ends the span of the Lock
// whose hold c passes for it. A deferred call releases nothing yet.
func (w *walker) releasesThrough(c *ast.CallExpr) {
	if w.deferring > 0 {
		return
	}
	if v, ok := w.pass.TypesInfo.Uses[identOf(c.Fun)].(*types.Var); ok {
		if d, ok := w.r.defs.single(v); ok && d.index == 0 {
			if lit, ok := ast.Unparen(d.expr).(*ast.FuncLit); ok {
				for _, o := range w.unlocksIn(lit.Body) {
					w.release(o)
				}
			}
		}
		return
	}
	fn := typeutil.StaticCallee(w.pass.TypesInfo, c)
	if fn == nil {
		return
	}
	params := w.unlockedParams(fn)
	if len(params) == 0 {
		return
	}
	_, args := callArgs(w.pass.TypesInfo, c, fn)
	for i, a := range args {
		if org := w.r.origin(a); params[i] && org.kind == originLock {
			w.spans = slices.DeleteFunc(w.spans, func(s region) bool { return s.call.Pos() == org.at })
		}
	}
}

// unlocksIn is the Unlocks that body makes when it runs (not those of its
// goroutines or func literals).
func (w *walker) unlocksIn(body ast.Node) []op {
	var out []op
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GoStmt, *ast.FuncLit:
			return false
		case *ast.CallExpr:
			if o, ok := w.r.op(n); ok && o.kind == opUnlock {
				out = append(out, o)
			}
		}
		return true
	})
	return out
}

// unlockedParams is which parameters of fn, a function of this package,
// its body gives to an Unlock: fn releases the hold its caller passes
// there. Cached per function.
func (w *walker) unlockedParams(fn *types.Func) map[int]bool {
	fn = fn.Origin()
	if w.unlocked == nil {
		w.unlocked = make(map[*types.Func]map[int]bool)
		w.decls = make(map[*types.Func]*ast.FuncDecl)
		w.funcs(func(fd *ast.FuncDecl, f *types.Func) { w.decls[f] = fd })
	}
	if out, ok := w.unlocked[fn]; ok {
		return out
	}
	w.unlocked[fn] = nil // a recursive helper: nothing known yet
	fd := w.decls[fn]
	if fd == nil {
		return nil
	}
	idx := make(map[types.Object]int)
	i := 0
	for _, f := range fd.Type.Params.List {
		if len(f.Names) == 0 {
			i++
		}
		for _, n := range f.Names {
			idx[w.pass.TypesInfo.Defs[n]] = i
			i++
		}
	}
	out := make(map[int]bool)
	for _, o := range w.unlocksIn(fd.Body) {
		if id := identOf(o.ctx); id != nil {
			if k, ok := idx[w.pass.TypesInfo.Uses[id]]; ok {
				out[k] = true
			}
		}
	}
	w.unlocked[fn] = out
	return out
}
