package vet

import (
	"go/ast"
	"go/token"
	"go/types"
)

// checkCtx reports a lock taken inside a critical section with a ctx that
// is not the hold's: the outer ctx, another hold's, or a fresh
// context.Background(). Taking the same lock again that way is a
// self-deadlock. A semaphore's permit is never re-entered, whatever the
// ctx, so taking one with a wrong ctx is a wrongctx finding (losing the
// hold does not cancel it), never a self-deadlock.
func (w *walker) checkCtx(c *ast.CallExpr, o op) {
	if len(w.held) == 0 || !w.report {
		return
	}
	org := w.r.origin(o.ctx)
	var what string
	switch org.kind {
	case originBackground:
		what = types.ExprString(ast.Unparen(o.ctx))
	case originVar:
		what = org.v.Name()
	default:
		return
	}
	// outside reports whether the ctx comes from outside region h.
	outside := func(h region) bool {
		if h.lit == nil {
			return false
		}
		if org.kind == originBackground {
			return true
		}
		if org.v == h.ctx {
			return false
		}
		return org.v.Pos() < h.lit.Pos() || org.v.Pos() >= h.lit.End()
	}
	for _, h := range w.held {
		if o.lock == "" || o.permit || h.op.lock != o.lock || (h.op.mode == "read" && o.mode == "read" && !h.op.writersFirst) || !sameParams(o.params, h.op.params) || !outside(h) {
			continue
		}
		w.finding(o.ctx.Pos(), "selfdeadlock",
			"self-deadlock: "+display(o.lock)+" is taken again with "+what+" while this goroutine holds it: "+fixCtx(h),
			note(h.call.Pos(), display(o.lock)+" is taken here; with "+what+" the call cannot re-enter it and waits for its own caller's hold until its wait time runs out, every time"))
		return
	}
	h := w.held[len(w.held)-1]
	if !outside(h) {
		return
	}
	if org.kind == originVar && !o.permit {
		for _, outer := range w.held {
			if outer.ctx == org.v && o.lock != "" && outer.op.lock == o.lock {
				return // an enclosing hold's own ctx re-enters its lock
			}
		}
	}
	held := lockName(h.op.lock)
	if o.permit {
		w.finding(o.ctx.Pos(), "wrongctx",
			"the semaphore "+lockName(o.lock)+" is taken with "+what+" inside the critical section of "+held+": "+fixCtx(h),
			note(h.call.Pos(), held+" is taken here; "+what+" does not carry its hold, so losing "+held+" cancels neither the wait for a permit nor the work done with it"))
		return
	}
	w.finding(o.ctx.Pos(), "wrongctx",
		lockName(o.lock)+" is taken with "+what+" inside the critical section of "+held+": "+fixCtx(h),
		note(h.call.Pos(), held+" is taken here; "+what+" does not carry its hold, so the call re-enters no lock held here, and losing "+held+" does not cancel it"))
}

// lockName is how a message names a lock: by its identity, or "a lock"
// when the analyzer cannot name it.
func lockName(id string) string {
	if id == "" {
		return "a lock"
	}
	return display(id)
}

// fixCtx says which ctx to pass instead: fn's, the hold's.
func fixCtx(h region) string {
	if h.ctx == nil {
		return "pass the hold's ctx (name fn's ctx parameter)"
	}
	return "pass " + h.ctx.Name() + ", the hold's ctx"
}

// sameParams reports whether two lock calls name the same key: the same
// param expressions (or none known on either side).
func sameParams(a, b []ast.Expr) bool {
	if len(a) != len(b) {
		return len(a) == 0 || len(b) == 0
	}
	for i := range a {
		if types.ExprString(a[i]) != types.ExprString(b[i]) {
			return false
		}
	}
	return true
}

// holdOf returns the critical section whose hold e carries, when e is
// (derived from) the ctx parameter of one being walked.
func (w *walker) holdOf(e ast.Expr) *region {
	if len(w.held) == 0 {
		return nil
	}
	org := w.r.origin(e)
	if org.kind != originVar {
		return nil
	}
	for i := range w.held {
		if h := &w.held[i]; h.ctx != nil && h.ctx == org.v {
			return h
		}
	}
	return nil
}

// escaped reports the hold's ctx of h used at pos where it outlives the hold.
func (w *walker) escaped(pos token.Pos, h *region, what string) {
	w.finding(pos, "escape", h.ctx.Name()+", the hold's ctx, "+what,
		note(h.call.Pos(), lockName(h.op.lock)+" is taken here; whoever has "+h.ctx.Name()+" keeps the hold's identity after fn returns and the lock is released"))
}

// checkEscapeGo reports a goroutine started inside a critical section that
// uses the hold's ctx.
func (w *walker) checkEscapeGo(g *ast.GoStmt) {
	if len(w.held) == 0 {
		return
	}
	var found *ast.Ident
	var h *region
	ast.Inspect(g.Call, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok && found == nil {
			if hh := w.holdOf(id); hh != nil {
				found, h = id, hh
			}
		}
		return found == nil
	})
	if found != nil && !w.waitedFor(g) {
		w.escaped(found.Pos(), h, "escapes its critical section into a goroutine (give it a ctx from outside the hold, or wait for it inside fn with a sync.WaitGroup or errgroup)")
	}
}

// waitedFor reports whether the critical section around g waits on a
// sync.WaitGroup or an errgroup.Group after g, or in a defer: its
// goroutines then end before fn returns, and the hold's ctx does not
// outlive the hold. A Wait in a goroutine, or in a func literal that is
// not called on the spot, does not hold fn back.
func (w *walker) waitedFor(g *ast.GoStmt) bool {
	h := w.held[len(w.held)-1]
	if h.lit == nil {
		return false
	}
	waits := false
	var visit func(root ast.Node, deferred bool)
	visit = func(root ast.Node, deferred bool) {
		ast.Inspect(root, func(n ast.Node) bool {
			if waits {
				return false
			}
			switch n := n.(type) {
			case *ast.GoStmt, *ast.FuncLit:
				return false
			case *ast.DeferStmt:
				visit(n.Call, true)
				return false
			case *ast.CallExpr:
				if lit, ok := ast.Unparen(n.Fun).(*ast.FuncLit); ok {
					visit(lit.Body, deferred)
				}
				waits = waits || (deferred || n.Pos() >= g.End()) && w.isWait(n)
			}
			return true
		})
	}
	visit(h.lit.Body, false)
	return waits
}

// isWait reports whether c is the Wait of a sync.WaitGroup or an
// errgroup.Group.
func (w *walker) isWait(c *ast.CallExpr) bool {
	sel, ok := ast.Unparen(c.Fun).(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "Wait" {
		return false
	}
	t := types.Unalias(w.pass.TypesInfo.TypeOf(sel.X))
	if p, ok := t.(*types.Pointer); ok {
		t = types.Unalias(p.Elem())
	}
	if n, ok := t.(*types.Named); ok && n.Obj().Pkg() != nil {
		switch n.Obj().Pkg().Path() + "." + n.Obj().Name() {
		case "sync.WaitGroup", "golang.org/x/sync/errgroup.Group":
			return true
		}
	}
	return false
}

// carried is the hold whose ctx e is, derives from, or carries: as an
// element appended (append's args), a composite literal's element (also
// behind &), or a variable a func literal captures; a variable assigned
// once is followed to its composite or func literal (req := request{ctx:
// hctx}; s.reqs = append(s.reqs, req)). Other calls are not searched:
// what they return is computed with the ctx, not the ctx.
func (w *walker) carried(e ast.Expr) *region { return w.carriedIn(e, 0) }

// maxCarried bounds how deep carried follows literals and variables.
const maxCarried = 8

func (w *walker) carriedIn(e ast.Expr, depth int) *region {
	if h := w.holdOf(e); h != nil || depth > maxCarried {
		return h
	}
	depth++
	carried := func(e ast.Expr) *region { return w.carriedIn(e, depth) }
	switch e := ast.Unparen(e).(type) {
	case *ast.Ident:
		if v, ok := w.pass.TypesInfo.Uses[e].(*types.Var); ok {
			if d, ok := w.r.defs.single(v); ok && d.index == 0 && isLiteral(d.expr) {
				return carried(d.expr)
			}
		}
	case *ast.CallExpr:
		if b, ok := w.pass.TypesInfo.Uses[identOf(e.Fun)].(*types.Builtin); ok && b.Name() == "append" {
			for _, arg := range e.Args[1:] {
				if h := carried(arg); h != nil {
					return h
				}
			}
		}
	case *ast.UnaryExpr:
		if e.Op == token.AND {
			return carried(e.X)
		}
	case *ast.CompositeLit:
		for _, el := range e.Elts {
			if kv, ok := el.(*ast.KeyValueExpr); ok {
				el = kv.Value
			}
			if h := carried(el); h != nil {
				return h
			}
		}
	case *ast.FuncLit:
		var found *region
		ast.Inspect(e.Body, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok && found == nil {
				found = w.holdOf(id)
			}
			return found == nil
		})
		return found
	}
	return nil
}

// isLiteral reports whether e is a composite literal (also behind &) or
// a func literal: what carried follows a variable into.
func isLiteral(e ast.Expr) bool {
	switch e := ast.Unparen(e).(type) {
	case *ast.CompositeLit, *ast.FuncLit:
		return true
	case *ast.UnaryExpr:
		return e.Op == token.AND && isLiteral(e.X)
	}
	return false
}

// identOf is the identifier e names, or nil.
func identOf(e ast.Expr) *ast.Ident {
	id, _ := ast.Unparen(e).(*ast.Ident)
	return id
}

// checkEscapeAssign reports the hold's ctx stored in a field, a global or
// a variable declared outside the critical section, as itself or carried
// in what is stored (see carried). A field or element is judged by the
// variable it belongs to: one declared inside fn (a local slice of steps,
// an options value, a map) is gone when fn returns, so is not reported.
func (w *walker) checkEscapeAssign(a *ast.AssignStmt) {
	if len(w.held) == 0 || a.Tok != token.ASSIGN || len(a.Lhs) != len(a.Rhs) {
		return
	}
	for i, r := range a.Rhs {
		held := w.carried(r)
		if held == nil {
			continue
		}
		lhs := ast.Unparen(a.Lhs[i])
		outside := w.outside(held, lhs)
		if outside == "" {
			continue
		}
		where := outside
		switch lhs.(type) {
		case *ast.SelectorExpr:
			where = "the field " + types.ExprString(lhs)
		case *ast.IndexExpr, *ast.IndexListExpr, *ast.StarExpr:
			where = types.ExprString(lhs)
		}
		w.escaped(a.Lhs[i].Pos(), held, "escapes its critical section: stored in "+where+" (keep it inside fn)")
	}
}

// outside describes where the variable that e (x, x.f, x[i], *x, …)
// stores into lives when it outlives h's fn: a global, or a variable
// declared outside fn (its parameters and receiver included). It is ""
// for a variable declared inside fn; a root it cannot name (a call's
// result) counts as outside.
func (w *walker) outside(h *region, e ast.Expr) string {
	root := e
	for {
		switch x := ast.Unparen(root).(type) {
		case *ast.SelectorExpr:
			if _, ok := w.pass.TypesInfo.Uses[identOf(x.X)].(*types.PkgName); ok {
				return "the global " + types.ExprString(x)
			}
			root = x.X
			continue
		case *ast.IndexExpr:
			root = x.X
			continue
		case *ast.IndexListExpr:
			root = x.X
			continue
		case *ast.StarExpr:
			root = x.X
			continue
		}
		break
	}
	id := identOf(root)
	if id == nil {
		return types.ExprString(e)
	}
	lv, ok := w.pass.TypesInfo.Uses[id].(*types.Var)
	switch {
	case !ok:
		return ""
	case lv.Parent() == w.pass.Pkg.Scope():
		return "the global " + id.Name
	case h.lit != nil && (lv.Pos() < h.lit.Pos() || lv.Pos() >= h.lit.End()):
		return id.Name + ", declared outside fn"
	}
	return ""
}

// checkUnlock reports an Unlock given a ctx that no Lock or TryLock on the
// same handle returned in this function.
func (w *walker) checkUnlock(c *ast.CallExpr, o op) {
	if !w.report {
		return
	}
	unlock, lock, fix := "Unlock", "Lock", "hctx, err := m.Lock(ctx); defer m.Unlock(hctx)"
	fails := "the Unlock fails with runtime.ErrNotHeld, and the lock stays held until its lease runs out"
	if o.permit {
		unlock, lock, fix = "Release", "Acquire", "hctx, err := s.Acquire(ctx, 1); defer s.Release(hctx)"
		fails = "the Release fails with runtime.ErrNotHeld, and the permits stay held until their lease runs out"
	}
	ctx := types.ExprString(ast.Unparen(o.ctx))
	org := w.r.origin(o.ctx)
	switch org.kind {
	case originBackground:
		w.finding(o.ctx.Pos(), "unlock", unlock+" with "+ctx+", which carries no hold, fails with runtime.ErrNotHeld ("+fix+")")
	case originLock:
		if org.handle == "" || o.handle == "" || org.handle == o.handle {
			return // an unknown handle on either side may well be the same lock
		}
		w.finding(o.ctx.Pos(), "unlock", unlock+" with "+ctx+", the hold of another lock ("+fix+")",
			note(org.at, ctx+" is the hold this "+lock+" returns; "+fails))
	case originVar:
		at, ok := w.lockInputs[o.pairKey()][org.v]
		if !ok {
			return
		}
		w.finding(o.ctx.Pos(), "unlock", unlock+" with "+ctx+", the ctx passed to "+lock+", not the one it returned ("+fix+")",
			note(at, ctx+" is passed to "+lock+" here; "+fails))
	}
}

// pairKey names a handle for matching its Lock and Unlock in one function:
// its identity when known, else its receiver as written.
func (o op) pairKey() string {
	if o.handle != "" {
		return o.handle
	}
	return "recv " + o.recv
}

// checkUseAfterUnlock reports a hold's ctx (a Lock's result) given to an
// acquisition after the Unlock that released it, in source order within
// one block. Only an Unlock on the Lock's own handle (as written) that is
// a statement of the block itself counts (not one in a branch, a defer or
// a func literal), so a use that may run while the lock is held is never
// reported.
func (w *walker) checkUseAfterUnlock(body *ast.BlockStmt) {
	ast.Inspect(body, func(n ast.Node) bool {
		b, ok := n.(*ast.BlockStmt)
		if !ok {
			return true
		}
		released := map[token.Pos]token.Pos{} // a Lock call → the Unlock of its hold
		for _, s := range b.List {
			w.usesAfterUnlock(s, released)
			if c := stmtCall(s); c != nil {
				if o, ok := w.r.op(c); ok && o.kind == opUnlock {
					org := w.r.origin(o.ctx)
					if lk, ok := w.lockOps[org.at]; ok && org.kind == originLock && lk.recv != "" && lk.recv == o.recv {
						released[org.at] = c.Pos()
					}
				}
			}
		}
		return true
	})
}

// stmtCall is the call a statement makes itself: f(…), _ = f(…), or an
// if statement's init.
func stmtCall(s ast.Stmt) *ast.CallExpr {
	switch s := s.(type) {
	case *ast.ExprStmt:
		c, _ := ast.Unparen(s.X).(*ast.CallExpr)
		return c
	case *ast.AssignStmt:
		if len(s.Rhs) == 1 {
			c, _ := ast.Unparen(s.Rhs[0]).(*ast.CallExpr)
			return c
		}
	case *ast.IfStmt:
		if s.Init != nil {
			return stmtCall(s.Init)
		}
	}
	return nil
}

// usesAfterUnlock reports the acquisitions in s given the ctx of a hold
// released earlier in its block.
func (w *walker) usesAfterUnlock(s ast.Stmt, released map[token.Pos]token.Pos) {
	if len(released) == 0 {
		return
	}
	ast.Inspect(s, func(n ast.Node) bool {
		if _, ok := n.(*ast.FuncLit); ok {
			return false // runs later, or not at all
		}
		c, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		o, ok := w.r.op(c)
		if !ok || o.kind == opUnlock || o.ctx == nil {
			return true
		}
		org := w.r.origin(o.ctx)
		unlock, ok := released[org.at]
		if org.kind != originLock || !ok {
			return true
		}
		ctx := types.ExprString(ast.Unparen(o.ctx))
		use := "the ctx the Lock was given"
		if lk := w.lockOps[org.at]; lk.ctx != nil {
			use = types.ExprString(ast.Unparen(lk.ctx)) + ", " + use
		}
		w.finding(o.ctx.Pos(), "unlock", ctx+", the hold's ctx, is used after its Unlock released the lock: it still carries that hold's identity (use "+use+")",
			note(unlock, "the Unlock that released "+ctx+"'s hold"))
		return true
	})
}
