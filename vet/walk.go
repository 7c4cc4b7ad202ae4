package vet

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/types/typeutil"
)

// region is a critical section: the fn a With<Name> helper or a handle's
// Do runs while the lock is held.
type region struct {
	op   op
	call *ast.CallExpr
	lit  *ast.FuncLit
	ctx  *types.Var // fn's ctx parameter, nil when it is unnamed or _
}

// walker walks the package's function bodies. It runs until the
// functions' summaries (the locks each may take) stop growing, then once
// more with report set to report and to collect the lock-order edges.
type walker struct {
	pass   *analysis.Pass
	r      *resolver
	ign    *ignores
	sums   map[*types.Func]map[string]Acq
	report bool

	cur        map[string]Acq // the summary of the function being walked; nil while detached
	held       []region
	lockInputs map[string]map[*types.Var]bool // per function: ctx variables passed into a handle's Lock
	edges      []Edge
}

func (w *walker) funcs(visit func(fd *ast.FuncDecl, fn *types.Func)) {
	for _, f := range w.pass.Files {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
				if fn, ok := w.pass.TypesInfo.Defs[fd.Name].(*types.Func); ok {
					visit(fd, fn)
				}
			}
		}
	}
}

// summarize computes every function's summary to a fixed point: a
// summary only grows, and is bounded by the locks the package can name.
func (w *walker) summarize() {
	for changed := true; changed; {
		changed = false
		w.funcs(func(fd *ast.FuncDecl, fn *types.Func) {
			w.walkFunc(fd)
			if len(w.cur) != len(w.sums[fn]) {
				w.sums[fn], changed = w.cur, true
			}
		})
	}
}

func (w *walker) walkFunc(fd *ast.FuncDecl) {
	w.cur, w.held = make(map[string]Acq), nil
	w.lockInputs = make(map[string]map[*types.Var]bool)
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		if c, ok := n.(*ast.CallExpr); ok {
			if o, ok := w.r.op(c); ok && o.kind == opLock {
				if org := w.r.origin(o.ctx); org.kind == originVar {
					if w.lockInputs[o.pairKey()] == nil {
						w.lockInputs[o.pairKey()] = make(map[*types.Var]bool)
					}
					w.lockInputs[o.pairKey()][org.v] = true
				}
			}
		}
		return true
	})
	w.walk(fd.Body)
}

// detached walks n as code that does not run while the current locks are
// held and whose locks are not taken by a call of the current function:
// a goroutine, or a function literal that is not called on the spot.
func (w *walker) detached(n ast.Node) {
	cur, held := w.cur, w.held
	w.cur, w.held = nil, nil
	w.walk(n)
	w.cur, w.held = cur, held
}

func (w *walker) walk(n ast.Node) {
	ast.Inspect(n, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GoStmt:
			w.checkEscapeGo(n)
			w.detached(n.Call)
			return false
		case *ast.FuncLit:
			w.detached(n.Body)
			return false
		case *ast.AssignStmt:
			w.checkEscapeAssign(n)
		case *ast.SendStmt:
			if v := w.holdVar(n.Value); v != nil {
				w.reportf(n.Value.Pos(), "escape", "the hold's ctx %s escapes its critical section: sent on a channel, it keeps the hold's identity after fn returns and the lock is released (send a ctx from outside the hold)", v.Name())
			}
		case *ast.CallExpr:
			return w.call(n)
		}
		return true
	})
}

// call handles a call and reports whether to walk its children.
func (w *walker) call(c *ast.CallExpr) bool {
	if lit, ok := ast.Unparen(c.Fun).(*ast.FuncLit); ok { // func(){ … }(): runs here
		w.walk(lit.Body)
		for _, a := range c.Args {
			w.walk(a)
		}
		return false
	}
	o, ok := w.r.op(c)
	if !ok {
		if fn := typeutil.StaticCallee(w.pass.TypesInfo, c); fn != nil {
			w.through(c, fn)
		}
		return true
	}
	switch o.kind {
	case opUnlock:
		w.checkUnlock(c, o)
		return true
	case opLock:
		w.acquire(c, o)
		return true
	}
	w.acquire(c, o)
	for _, a := range c.Args {
		if a != o.fn {
			w.walk(a)
		}
	}
	switch fn := ast.Unparen(o.fn).(type) {
	case *ast.FuncLit:
		reg := region{op: o, call: c, lit: fn}
		// fn's first parameter is the hold's ctx (a fenced lock's fn also
		// gets the token after it).
		if ps := fn.Type.Params.List; len(ps) >= 1 && len(ps[0].Names) >= 1 && ps[0].Names[0].Name != "_" {
			reg.ctx, _ = w.pass.TypesInfo.Defs[ps[0].Names[0]].(*types.Var)
		}
		w.held = append(w.held, reg)
		w.walk(fn.Body)
		w.held = w.held[:len(w.held)-1]
	case nil:
	default:
		// A named function run under the hold: what it takes, it takes while held.
		if f, ok := typeutil.Callee(w.pass.TypesInfo, &ast.CallExpr{Fun: fn}).(*types.Func); ok && !isInterfaceMethod(f) {
			w.held = append(w.held, region{op: o, call: c})
			w.through(c, f)
			w.held = w.held[:len(w.held)-1]
		} else {
			w.walk(fn)
		}
	}
	return false
}

// acquire records that the call takes o's locks: in the current
// function's summary, as edges from every lock held here, and checks the
// ctx it is given.
func (w *walker) acquire(c *ast.CallExpr, o op) {
	at := posn(w.pass.Fset, c.Pos())
	for _, m := range o.members {
		w.take(Acq{Lock: m, At: at, Permit: o.permit}, c.Pos())
	}
	w.checkCtx(c, o)
}

func (w *walker) through(c *ast.CallExpr, fn *types.Func) {
	for _, a := range w.summary(fn) {
		w.take(Acq{Lock: a.Lock, At: posn(w.pass.Fset, c.Pos()),
			Via: fmt.Sprintf("through %s, which takes it at %s", funcName(fn), a.At), Permit: a.Permit}, c.Pos())
	}
}

func (w *walker) take(a Acq, pos token.Pos) {
	if w.cur != nil {
		if _, ok := w.cur[a.Lock]; !ok {
			w.cur[a.Lock] = a
		}
	}
	if !w.report || w.ign.covers(w.pass.Fset, pos) {
		return
	}
	for _, h := range w.held {
		for _, m := range h.op.members {
			if m == a.Lock {
				return // held already: a re-entry takes nothing new (or a self-deadlock, reported on its own)
			}
		}
	}
	for _, h := range w.held {
		for _, from := range h.op.members {
			if from != a.Lock {
				w.edges = append(w.edges, Edge{From: from, To: a.Lock, At: a.At, Held: posn(w.pass.Fset, h.call.Pos()), Via: a.Via,
					FromPermit: h.op.permit, ToPermit: a.Permit})
			}
		}
	}
}

func (w *walker) summary(fn *types.Func) []Acq {
	fn = fn.Origin() // a generic function's instances share its summary
	if fn.Pkg() == nil {
		return nil
	}
	if fn.Pkg() == w.pass.Pkg {
		s := w.sums[fn]
		out := make([]Acq, 0, len(s))
		for _, a := range s {
			out = append(out, a)
		}
		return sortAcqs(out)
	}
	var f acquires
	if w.pass.ImportObjectFact(fn, &f) {
		return f.Acqs
	}
	return nil
}

func funcName(fn *types.Func) string {
	if recv := fn.Signature().Recv(); recv != nil {
		t := recv.Type()
		if p, ok := t.(*types.Pointer); ok {
			t = p.Elem()
		}
		if n, ok := t.(*types.Named); ok {
			return fn.Pkg().Name() + "." + n.Obj().Name() + "." + fn.Name()
		}
	}
	return fn.Pkg().Name() + "." + fn.Name()
}

func (w *walker) reportf(pos token.Pos, category, format string, args ...any) {
	if !w.report || w.ign.covers(w.pass.Fset, pos) {
		return
	}
	w.pass.Report(analysis.Diagnostic{Pos: pos, Category: category, Message: fmt.Sprintf(format, args...)})
}

// isInterfaceMethod reports whether fn is an interface's method: which
// function a call of it runs is not known statically.
func isInterfaceMethod(fn *types.Func) bool {
	recv := fn.Signature().Recv()
	return recv != nil && types.IsInterface(recv.Type())
}
