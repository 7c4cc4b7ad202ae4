package vet

import (
	"go/ast"
	"go/token"
	"go/types"
	"slices"

	"golang.org/x/tools/go/types/typeutil"
)

// unlockAlways is an Unlock that a function body makes on every way
// through it, and which of its parameters it gives that Unlock as the
// hold (-1 when another ctx: one the body captures).
type unlockAlways struct {
	op    op
	param int
}

// releasesThrough ends the spans (for the nested check) that the call c
// releases: a call of a closure (a variable assigned a func literal once)
// ends those its Unlocks would, of a hold it captures or is passed; a
// call of a function of this package whose body Unlocks one of its
// parameters ends the span of the Lock whose hold c passes for it. Only
// an Unlock made on every way through the body counts (a statement of the
// body itself, or its defer, before any statement that may return), and
// only on the handle of the Lock whose hold it is given. A deferred call
// releases nothing yet.
func (w *walker) releasesThrough(c *ast.CallExpr) {
	if w.deferring > 0 {
		return
	}
	if v, ok := w.pass.TypesInfo.Uses[identOf(c.Fun)].(*types.Var); ok {
		if d, ok := w.r.defs.single(v); ok && d.index == 0 {
			if lit, ok := ast.Unparen(d.expr).(*ast.FuncLit); ok {
				w.releaseArgs(c.Args, w.unlocksAlways(lit.Body, lit.Type.Params), lit)
			}
		}
		return
	}
	fn := typeutil.StaticCallee(w.pass.TypesInfo, c)
	if fn == nil {
		return
	}
	_, args := callArgs(w.pass.TypesInfo, c, fn)
	w.releaseArgs(args, w.unlockedParams(fn), nil)
}

// releaseArgs ends the span of the Lock whose hold each of unlocks is
// given: the call's argument for a parameter, else the ctx the closure
// lit captures. A hold taken inside lit itself is none of the caller's.
func (w *walker) releaseArgs(args []ast.Expr, unlocks []unlockAlways, lit *ast.FuncLit) {
	for _, u := range unlocks {
		var org origin
		switch {
		case u.param >= 0 && u.param < len(args):
			org = w.r.origin(args[u.param])
		case u.param < 0 && lit != nil:
			org = w.r.origin(u.op.ctx)
		}
		if org.kind != originLock || lit != nil && org.at >= lit.Pos() && org.at < lit.End() {
			continue
		}
		if u.op.handle != "" && org.handle != "" && u.op.handle != org.handle {
			continue // the hold of another handle's Lock
		}
		w.spans = slices.DeleteFunc(w.spans, func(s region) bool { return s.call.Pos() == org.at })
	}
}

// unlocksAlways is the Unlocks that body makes on every way through it:
// those of its own statements (or their defers, of a func literal too)
// before the first that may
// return (or, when body defers a recover, that makes a call: it may
// panic), not those in a branch, a loop, a goroutine or a func literal.
func (w *walker) unlocksAlways(body *ast.BlockStmt, params *ast.FieldList) []unlockAlways {
	recovers := w.defersRecover(body)
	idx := make(map[types.Object]int)
	i := 0
	for _, f := range params.List {
		if len(f.Names) == 0 {
			i++
		}
		for _, n := range f.Names {
			idx[w.pass.TypesInfo.Defs[n]] = i
			i++
		}
	}
	var out []unlockAlways
	for _, st := range body.List {
		var call ast.Expr
		switch st := st.(type) {
		case *ast.ExprStmt:
			call = st.X
		case *ast.AssignStmt:
			if len(st.Rhs) == 1 {
				call = st.Rhs[0]
			}
		case *ast.DeferStmt:
			call = st.Call
		}
		param := func(ctx ast.Expr) int {
			if k, ok := idx[w.pass.TypesInfo.Uses[identOf(ctx)]]; ok {
				return k
			}
			return -1
		}
		if c, ok := ast.Unparen(call).(*ast.CallExpr); ok {
			if o, ok := w.r.op(c); ok && o.kind == opUnlock {
				out = append(out, unlockAlways{o, param(o.ctx)})
			}
			if lit, ok := ast.Unparen(c.Fun).(*ast.FuncLit); ok && len(c.Args) == 0 {
				if _, deferred := st.(*ast.DeferStmt); deferred {
					// defer func() { … Unlock(h) … }(): when body returns.
					for _, u := range w.unlocksAlways(lit.Body, lit.Type.Params) {
						out = append(out, unlockAlways{u.op, param(u.op.ctx)})
					}
				}
			}
		}
		if mayReturn(st) || recovers && mayPanic(st) {
			break
		}
	}
	return out
}

// mayReturn reports whether st holds a return (or a goto) of its function.
func mayReturn(st ast.Stmt) bool {
	return outsideLits(st, func(n ast.Node) bool {
		b, isBranch := n.(*ast.BranchStmt)
		_, isReturn := n.(*ast.ReturnStmt)
		return isReturn || isBranch && b.Tok == token.GOTO
	})
}

// outsideLits reports whether match holds for a node of n outside the
// func literals in n (their returns and calls are not n's).
func outsideLits(n ast.Node, match func(ast.Node) bool) bool {
	found := false
	ast.Inspect(n, func(n ast.Node) bool {
		if _, lit := n.(*ast.FuncLit); lit || found {
			return false
		}
		found = n != nil && match(n)
		return !found
	})
	return found
}

// defersRecover reports whether a statement of body defers a call that
// recovers: a func literal or a function of this package that calls
// recover. A panic then returns from body.
func (w *walker) defersRecover(body *ast.BlockStmt) bool {
	for _, st := range body.List {
		d, ok := st.(*ast.DeferStmt)
		if !ok {
			continue
		}
		if lit, ok := ast.Unparen(d.Call.Fun).(*ast.FuncLit); ok && w.callsRecover(lit.Body) {
			return true
		}
		if fn := typeutil.StaticCallee(w.pass.TypesInfo, d.Call); fn != nil {
			if fd := w.decl(fn.Origin()); fd != nil && w.callsRecover(fd.Body) {
				return true
			}
		}
	}
	return false
}

// callsRecover reports whether n calls recover (outside the func literals
// in it).
func (w *walker) callsRecover(n ast.Node) bool {
	return outsideLits(n, func(n ast.Node) bool {
		c, ok := n.(*ast.CallExpr)
		if !ok {
			return false
		}
		b, ok := w.pass.TypesInfo.Uses[identOf(c.Fun)].(*types.Builtin)
		return ok && b.Name() == "recover"
	})
}

// mayPanic reports whether st makes a call (outside the func literals in
// it): any call may panic. A defer makes only the calls in its arguments.
func mayPanic(st ast.Stmt) bool {
	isCall := func(n ast.Node) bool { _, ok := n.(*ast.CallExpr); return ok }
	d, ok := st.(*ast.DeferStmt)
	if !ok {
		return outsideLits(st, isCall)
	}
	return slices.ContainsFunc(d.Call.Args, func(a ast.Expr) bool { return outsideLits(a, isCall) })
}

// unlockedParams is the Unlocks that fn, a function of this package,
// makes on every way through its body of the hold a parameter gives: fn
// releases the hold its caller passes there. Cached per function.
func (w *walker) unlockedParams(fn *types.Func) []unlockAlways {
	fn = fn.Origin()
	if out, ok := w.unlocked[fn]; ok {
		return out
	}
	fd := w.decl(fn)
	w.unlocked[fn] = nil // a recursive helper: nothing known yet
	if fd == nil {
		return nil
	}
	out := slices.DeleteFunc(w.unlocksAlways(fd.Body, fd.Type.Params), func(u unlockAlways) bool { return u.param < 0 })
	w.unlocked[fn] = out
	return out
}

// decl is the declaration of fn, a function of this package (nil: none).
func (w *walker) decl(fn *types.Func) *ast.FuncDecl {
	if w.unlocked == nil {
		w.unlocked = make(map[*types.Func][]unlockAlways)
		w.decls = make(map[*types.Func]*ast.FuncDecl)
		w.funcs(func(fd *ast.FuncDecl, f *types.Func) { w.decls[f] = fd })
	}
	return w.decls[fn]
}
