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
		if o.lock == "" || o.permit || h.op.lock != o.lock || (h.op.mode == "read" && o.mode == "read") || !sameParams(o.params, h.op.params) || !outside(h) {
			continue
		}
		w.reportf(o.ctx.Pos(), "selfdeadlock",
			"self-deadlock: %s is taken again with %s, not %s, while this goroutine holds it (taken at %s): it cannot re-enter and waits for itself until its wait time runs out (%s)",
			display(o.lock), what, holdName(h), posn(w.pass.Fset, h.call.Pos()), fixCtx(h))
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
	if o.permit {
		w.reportf(o.ctx.Pos(), "wrongctx",
			"the semaphore %s is taken with %s, not %s, inside the critical section of %s (taken at %s): that ctx does not carry the hold, so losing %s cancels neither the wait for a permit nor the work done with it (%s)",
			lockName(o.lock), what, holdName(h), lockName(h.op.lock), posn(w.pass.Fset, h.call.Pos()), lockName(h.op.lock), fixCtx(h))
		return
	}
	w.reportf(o.ctx.Pos(), "wrongctx",
		"%s is taken with %s, not %s, inside the critical section of %s (taken at %s): that ctx does not carry the hold, so the call re-enters no lock held here, and losing %s does not cancel it (%s)",
		lockName(o.lock), what, holdName(h), lockName(h.op.lock), posn(w.pass.Fset, h.call.Pos()), lockName(h.op.lock), fixCtx(h))
}

// lockName is how a message names a lock: by its identity, or "a lock"
// when the analyzer cannot name it.
func lockName(id string) string {
	if id == "" {
		return "a lock"
	}
	return display(id)
}

func holdName(h region) string {
	if h.ctx == nil {
		return "the hold's ctx"
	}
	return "the hold's ctx " + h.ctx.Name()
}

func fixCtx(h region) string {
	if h.ctx == nil {
		return "name fn's ctx parameter and pass it"
	}
	return "pass " + h.ctx.Name()
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

// holdVar returns the hold ctx e carries, when e is (derived from) the ctx
// parameter of a critical section being walked.
func (w *walker) holdVar(e ast.Expr) *types.Var {
	if len(w.held) == 0 {
		return nil
	}
	org := w.r.origin(e)
	if org.kind != originVar {
		return nil
	}
	for _, h := range w.held {
		if h.ctx != nil && h.ctx == org.v {
			return h.ctx
		}
	}
	return nil
}

// checkEscapeGo reports a goroutine started inside a critical section that
// uses the hold's ctx.
func (w *walker) checkEscapeGo(g *ast.GoStmt) {
	if len(w.held) == 0 {
		return
	}
	var found *ast.Ident
	var v *types.Var
	ast.Inspect(g.Call, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok && found == nil {
			if hv := w.holdVar(id); hv != nil {
				found, v = id, hv
			}
		}
		return found == nil
	})
	if found != nil && !w.waitedFor(g) {
		w.reportf(found.Pos(), "escape", "the hold's ctx %s escapes its critical section into a goroutine: the goroutine keeps the hold's identity after fn returns and the lock is released (pass it a ctx from outside the hold, or wait for it inside fn with a sync.WaitGroup or errgroup)", v.Name())
	}
}

// waitedFor reports whether the critical section around g waits, after
// g, on a sync.WaitGroup or an errgroup.Group: its goroutines then end
// before fn returns, and the hold's ctx does not outlive the hold.
func (w *walker) waitedFor(g *ast.GoStmt) bool {
	h := w.held[len(w.held)-1]
	if h.lit == nil {
		return false
	}
	waits := false
	ast.Inspect(h.lit.Body, func(n ast.Node) bool {
		c, ok := n.(*ast.CallExpr)
		if !ok || c.Pos() < g.End() || waits {
			return !waits
		}
		sel, ok := ast.Unparen(c.Fun).(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != "Wait" {
			return true
		}
		t := w.pass.TypesInfo.TypeOf(sel.X)
		if p, ok := t.(*types.Pointer); ok {
			t = p.Elem()
		}
		if n, ok := t.(*types.Named); ok && n.Obj().Pkg() != nil {
			switch n.Obj().Pkg().Path() + "." + n.Obj().Name() {
			case "sync.WaitGroup", "golang.org/x/sync/errgroup.Group":
				waits = true
			}
		}
		return true
	})
	return waits
}

// checkEscapeAssign reports the hold's ctx stored in a field, a global or
// a variable declared outside the critical section.
func (w *walker) checkEscapeAssign(a *ast.AssignStmt) {
	if len(w.held) == 0 || a.Tok != token.ASSIGN || len(a.Lhs) != len(a.Rhs) {
		return
	}
	h := w.held[len(w.held)-1]
	for i, r := range a.Rhs {
		v := w.holdVar(r)
		if v == nil {
			continue
		}
		var where string
		switch l := ast.Unparen(a.Lhs[i]).(type) {
		case *ast.SelectorExpr:
			where = "the field " + types.ExprString(l)
		case *ast.IndexExpr:
			where = types.ExprString(l)
		case *ast.Ident:
			lv, ok := w.pass.TypesInfo.Uses[l].(*types.Var)
			switch {
			case !ok:
			case lv.Parent() == w.pass.Pkg.Scope():
				where = "the global " + l.Name
			case h.lit != nil && (lv.Pos() < h.lit.Pos() || lv.Pos() >= h.lit.End()):
				where = l.Name + ", declared outside fn"
			}
		}
		if where != "" {
			w.reportf(a.Lhs[i].Pos(), "escape", "the hold's ctx %s escapes its critical section: stored in %s, it keeps the hold's identity after fn returns and the lock is released (keep it inside fn)", v.Name(), where)
		}
	}
}

// checkUnlock reports an Unlock given a ctx that no Lock or TryLock on the
// same handle returned in this function.
func (w *walker) checkUnlock(c *ast.CallExpr, o op) {
	if !w.report {
		return
	}
	org := w.r.origin(o.ctx)
	var why string
	switch org.kind {
	case originBackground:
		why = types.ExprString(ast.Unparen(o.ctx)) + " carries no hold"
	case originLock:
		if org.handle == "" || o.handle == "" || org.handle == o.handle {
			return // an unknown handle on either side may well be the same lock
		}
		why = types.ExprString(ast.Unparen(o.ctx)) + " is the hold of another lock (taken at " + posn(w.pass.Fset, org.at).String() + ")"
	case originVar:
		if !w.lockInputs[o.pairKey()][org.v] {
			return
		}
		why = org.v.Name() + " is the ctx passed to Lock, not the one Lock returned"
		if o.permit {
			why = org.v.Name() + " is the ctx passed to Acquire, not the one Acquire returned"
		}
	default:
		return
	}
	if o.permit {
		w.reportf(o.ctx.Pos(), "unlock", "Release with a ctx that no Acquire on this semaphore returned: %s, so it fails with runtime.ErrNotHeld and the permits stay held until their lease runs out (hctx, err := s.Acquire(ctx, 1); defer s.Release(hctx))", why)
		return
	}
	w.reportf(o.ctx.Pos(), "unlock", "Unlock with a ctx that no Lock on this handle returned: %s, so it fails with runtime.ErrNotHeld and the lock stays held until its lease runs out (hctx, err := m.Lock(ctx); defer m.Unlock(hctx))", why)
}

// pairKey names a handle for matching its Lock and Unlock in one function:
// its identity when known, else its receiver as written.
func (o op) pairKey() string {
	if o.handle != "" {
		return o.handle
	}
	return "recv " + o.recv
}
