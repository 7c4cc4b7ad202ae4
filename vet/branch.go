package vet

import (
	"go/ast"
	"go/token"
	"go/types"
	"slices"
	"strings"

	"golang.org/x/tools/go/types/typeutil"
)

// The nested check follows a handle's Lock to its Unlock (w.spans). At a
// branch each way starts from the spans held before it; a way that ends in
// a return (or a panic) holds nothing after the statement; after it, a
// span held before it is held when every way that falls through still
// holds it, and a span opened in it when any of them does (joinSpans).
// In the branch taken when a Lock's error is not nil, that Lock holds
// nothing, and that branch does not count against its hold after the
// statement.

// ifStmt walks an if statement, a branch at a time.
func (w *walker) ifStmt(s *ast.IfStmt) {
	w.walkOpt(s.Init)
	w.walk(s.Cond)
	before := slices.Clone(w.spans)
	failed, onTrue := w.failedLock(s.Cond)
	var outs [][]region
	w.spans = withoutSpan(before, failed, onTrue)
	w.walk(s.Body)
	if !terminates(w.pass.TypesInfo, s.Body) {
		outs = append(outs, failedHolds(w.spans, before, failed, onTrue))
	}
	w.spans = withoutSpan(before, failed, !onTrue)
	w.walkOpt(s.Else)
	if s.Else == nil || !terminates(w.pass.TypesInfo, s.Else) {
		outs = append(outs, failedHolds(w.spans, before, failed, !onTrue))
	}
	w.spans = joinSpans(before, outs)
}

// failedHolds is a way out's spans for the join, with the span of the
// Lock at failed back when the way dropped it (dropped): where a Lock
// failed, it was not released; the way does not count against the hold
// of the ways where it succeeded.
func failedHolds(spans, before []region, failed token.Pos, dropped bool) []region {
	if !dropped || !failed.IsValid() || hasSpan(spans, failed) {
		return spans
	}
	for _, s := range before {
		if s.call.Pos() == failed {
			return append(slices.Clone(spans), s)
		}
	}
	return spans
}

// hasSpan reports whether spans hold the Lock at pos.
func hasSpan(spans []region, pos token.Pos) bool {
	return slices.ContainsFunc(spans, func(s region) bool { return s.call.Pos() == pos })
}

// switchStmt walks a switch, type switch or select statement, a clause at
// a time. Without a default clause, a switch may take none of them; a
// select always takes one. In a clause entered only when a Lock failed
// (caseFailed), that Lock holds nothing, as in an if's branch.
func (w *walker) switchStmt(init ast.Stmt, tag ast.Node, body *ast.BlockStmt, isSelect bool) {
	w.walkOpt(init)
	w.walkOpt(tag)
	before := slices.Clone(w.spans)
	var outs [][]region
	hasDefault := isSelect
	fell := false // the clause before ended in fallthrough
	for i, cl := range body.List {
		var stmts []ast.Stmt
		failed := token.NoPos
		switch cl := cl.(type) {
		case *ast.CaseClause:
			for _, e := range cl.List {
				w.walk(e)
			}
			stmts, hasDefault = cl.Body, hasDefault || cl.List == nil
			if !isSelect {
				failed = w.caseFailed(tag, body.List, i)
			}
		case *ast.CommClause:
			w.walkOpt(cl.Comm)
			stmts = cl.Body
		}
		direct := withoutSpan(before, failed, true)
		if fell {
			// Entered from the clause before too: what either way holds.
			w.spans = unionSpans(w.spans, direct)
			failed = token.NoPos
		} else {
			w.spans = direct
		}
		for _, st := range stmts {
			w.walk(st)
		}
		// A clause that falls through goes on into the next one, with
		// what it holds at its end: it is no way out of its own.
		if fell = fallsThrough(stmts); fell {
			continue
		}
		if !terminates(w.pass.TypesInfo, &ast.BlockStmt{List: stmts}) {
			outs = append(outs, failedHolds(w.spans, before, failed, true))
		}
	}
	if !hasDefault {
		outs = append(outs, before)
	}
	w.spans = joinSpans(before, outs)
}

// caseFailed finds the Lock that failed wherever the clause clauses[i] of
// an expression switch on tag (nil: on true) is entered: each of its
// expressions is true only when that Lock failed, or an expression of a
// case that had to be false first (the cases before it; for default,
// every case) is false only then.
func (w *walker) caseFailed(tag ast.Node, clauses []ast.Stmt, i int) token.Pos {
	var t ast.Expr
	if tag != nil {
		var ok bool
		if t, ok = tag.(ast.Expr); !ok {
			return token.NoPos // a type switch
		}
	}
	outcome := func(e ast.Expr) (token.Pos, bool) {
		if t == nil {
			return w.failedLock(e)
		}
		return w.failedLock(&ast.BinaryExpr{X: t, Op: token.EQL, Y: e, OpPos: e.Pos()})
	}
	own := clauses[i].(*ast.CaseClause).List
	failed := token.NoPos
	for j, e := range own {
		pos, onTrue := outcome(e)
		if !onTrue || j > 0 && pos != failed {
			failed = token.NoPos
			break
		}
		failed = pos
	}
	if failed.IsValid() {
		return failed
	}
	for j, c := range clauses {
		if j >= i && own != nil {
			break
		}
		for _, e := range c.(*ast.CaseClause).List {
			if pos, onTrue := outcome(e); pos.IsValid() && !onTrue {
				return pos
			}
		}
	}
	return token.NoPos
}

// unionSpans is a, and those of b not in a.
func unionSpans(a, b []region) []region {
	out := slices.Clone(a)
	for _, s := range b {
		if !hasSpan(out, s.call.Pos()) {
			out = append(out, s)
		}
	}
	return out
}

// fallsThrough reports whether a case clause's body ends in fallthrough.
func fallsThrough(stmts []ast.Stmt) bool {
	if len(stmts) == 0 {
		return false
	}
	b, ok := stmts[len(stmts)-1].(*ast.BranchStmt)
	return ok && b.Tok == token.FALLTHROUGH
}

// walkOpt walks n unless it is absent (a nil Init, Tag, Else or Comm).
func (w *walker) walkOpt(n ast.Node) {
	if n != nil {
		w.walk(n)
	}
}

// failedLock finds the Lock whose outcome cond tells: the position of its
// call (NoPos: none), and whether cond is true only when it failed
// (onTrue) or false only then. It reads err != nil, err == nil,
// errors.Is(err, target) and errors.As(err, target) (true only for an
// error), !, && and ||; err is followed to its last assignment
// before cond. A comparison of err with another value is true only for
// an error.
func (w *walker) failedLock(cond ast.Expr) (pos token.Pos, onTrue bool) {
	switch c := ast.Unparen(cond).(type) {
	case *ast.UnaryExpr:
		if c.Op == token.NOT {
			pos, onTrue := w.failedLock(c.X)
			return pos, !onTrue
		}
	case *ast.BinaryExpr:
		switch c.Op {
		case token.LAND, token.LOR:
			// a && b is true only when both are: one true only for a
			// failure says so of both; both false only then say so too
			// (and || the other way round).
			and := c.Op == token.LAND
			px, tx := w.failedLock(c.X)
			py, ty := w.failedLock(c.Y)
			switch {
			case px.IsValid() && tx == and:
				return px, tx
			case py.IsValid() && ty == and:
				return py, ty
			case px.IsValid() && px == py && tx == ty:
				return px, tx
			}
		case token.EQL, token.NEQ:
			for _, xy := range [][2]ast.Expr{{c.X, c.Y}, {c.Y, c.X}} {
				pos := w.lockErr(xy[0], cond.Pos())
				switch {
				case !pos.IsValid():
				case w.isNil(xy[1]):
					return pos, c.Op == token.NEQ
				case w.nonNilErr(xy[1]):
					// err == v, v never nil, is true only for an error.
					return pos, c.Op == token.EQL
				}
			}
		}
	case *ast.CallExpr:
		if fn, ok := typeutil.Callee(w.pass.TypesInfo, c).(*types.Func); ok && len(c.Args) == 2 &&
			fn.Pkg() != nil && fn.Pkg().Path() == "errors" && (fn.Name() == "As" || fn.Name() == "Is" && w.nonNilErr(c.Args[1])) {
			return w.lockErr(c.Args[0], cond.Pos()), true
		}
	}
	return token.NoPos, false
}

// lockErr is the position of the Lock call whose error x is (a variable
// whose last assignment before pos is that call), or NoPos.
func (w *walker) lockErr(x ast.Expr, pos token.Pos) token.Pos {
	id, ok := ast.Unparen(x).(*ast.Ident)
	if !ok {
		return token.NoPos
	}
	v, ok := w.pass.TypesInfo.Uses[id].(*types.Var)
	if !ok || !types.Identical(v.Type(), types.Universe.Lookup("error").Type()) {
		return token.NoPos
	}
	d, ok := w.r.defs.lastBefore(v, pos)
	if !ok {
		return token.NoPos
	}
	call, ok := ast.Unparen(d.expr).(*ast.CallExpr)
	if !ok {
		return token.NoPos
	}
	if o, ok := w.r.op(call); !ok || o.kind != opLock {
		return token.NoPos
	}
	return call.Pos()
}

// nonNilErr reports whether e is an error value that is never nil: a
// sentinel (a package-level variable named Err… or err…, or
// context.Canceled and context.DeadlineExceeded), or a call of errors.New
// or fmt.Errorf. Another value (ctx.Err(), another call's error) may be
// nil, and a comparison with it tells nothing of a Lock's outcome.
func (w *walker) nonNilErr(e ast.Expr) bool {
	e = ast.Unparen(e)
	if c, ok := e.(*ast.CallExpr); ok {
		fn, ok := typeutil.Callee(w.pass.TypesInfo, c).(*types.Func)
		return ok && fn.Pkg() != nil && (fn.Pkg().Path() == "errors" && fn.Name() == "New" || fn.Pkg().Path() == "fmt" && fn.Name() == "Errorf")
	}
	var id *ast.Ident
	switch e := e.(type) {
	case *ast.Ident:
		id = e
	case *ast.SelectorExpr:
		id = e.Sel
	default:
		return false
	}
	v, ok := w.pass.TypesInfo.Uses[id].(*types.Var)
	if !ok || v.Pkg() == nil || v.Parent() != v.Pkg().Scope() {
		return false // not a package-level variable
	}
	if v.Pkg().Path() == "context" {
		return v.Name() == "Canceled" || v.Name() == "DeadlineExceeded"
	}
	return strings.HasPrefix(v.Name(), "Err") || strings.HasPrefix(v.Name(), "err")
}

func (w *walker) isNil(e ast.Expr) bool {
	tv, ok := w.pass.TypesInfo.Types[e]
	return ok && tv.IsNil()
}

// lastBefore is v's last assignment before pos in the source, when v is
// followed at all (its address is never taken).
func (d *defs) lastBefore(v *types.Var, pos token.Pos) (def, bool) {
	var last def
	found := false
	for _, x := range d.m[v] {
		if !d.lost[v] && x.expr.Pos() < pos && (!found || x.expr.Pos() > last.expr.Pos()) {
			last, found = x, true
		}
	}
	return last, found
}

// withoutSpan is spans, less the span of the Lock at failed when drop.
func withoutSpan(spans []region, failed token.Pos, drop bool) []region {
	out := slices.Clone(spans)
	if drop && failed.IsValid() {
		out = slices.DeleteFunc(out, func(s region) bool { return s.call.Pos() == failed })
	}
	return out
}

// joinSpans is the spans held after a branch statement; before when no
// way falls through (the code after it is not reached from it). A span
// held before the statement is held after it only when it is held at the
// end of every way out that falls through (one that Unlocks it releases
// it); a span opened inside the statement is held after it when it is
// held at the end of any of them.
func joinSpans(before []region, outs [][]region) []region {
	if len(outs) == 0 {
		return before
	}
	var out []region
	for _, s := range before {
		if !slices.ContainsFunc(outs, func(o []region) bool { return !hasSpan(o, s.call.Pos()) }) {
			out = append(out, s)
		}
	}
	seen := make(map[token.Pos]bool)
	for _, s := range before {
		seen[s.call.Pos()] = true
	}
	for _, spans := range outs {
		for _, s := range spans {
			if !seen[s.call.Pos()] {
				seen[s.call.Pos()] = true
				out = append(out, s)
			}
		}
	}
	return out
}

// terminates reports whether s ends in a return or a panic on every way
// through it.
func terminates(info *types.Info, s ast.Stmt) bool {
	switch s := s.(type) {
	case *ast.BlockStmt:
		return len(s.List) > 0 && terminates(info, s.List[len(s.List)-1])
	case *ast.ReturnStmt:
		return true
	case *ast.ExprStmt:
		c, ok := ast.Unparen(s.X).(*ast.CallExpr)
		if !ok {
			return false
		}
		b, ok := info.Uses[identOf(c.Fun)].(*types.Builtin)
		return ok && b.Name() == "panic"
	case *ast.IfStmt:
		return s.Else != nil && terminates(info, s.Body) && terminates(info, s.Else)
	}
	return false
}
