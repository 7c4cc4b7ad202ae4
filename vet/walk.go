package vet

import (
	"go/ast"
	"go/token"
	"go/types"
	"slices"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/types/typeutil"
)

// region is a critical section: the fn a With<Name> helper or a handle's
// Do runs while the lock is held; or, as a span, the code after a
// handle's Lock or TryLock up to its Unlock.
type region struct {
	op   op
	call *ast.CallExpr
	lit  *ast.FuncLit
	ctx  *types.Var // fn's ctx parameter, nil when it is unnamed or _
	keys [][]string // per member of op: which instance is held, rendered here
}

// maxInstances bounds the instances of one lock in a function's summary.
const maxInstances = 8

// walker walks the package's function bodies. It runs until the
// functions' summaries (the locks each may take) stop growing, then once
// more with report set to report and to collect the lock-order edges.
type walker struct {
	pass   *analysis.Pass
	r      *resolver
	ign    *ignores
	sums   map[*types.Func]map[string]Acq
	report bool

	cur        map[string]Acq // the summary of the function being walked (by Acq.sumKey); nil while detached
	perLock    map[string]int // instances of each lock in cur
	held       []region
	spans      []region // Locks not yet unlocked: only for nested instances
	deferring  int      // inside a defer statement: its Unlock runs when the function returns
	here, tmpl *keyRenderer
	lockInputs map[string]map[*types.Var]token.Pos // per function: ctx variables passed into a handle's Lock, and where
	lockOps    map[token.Pos]op                    // per function: each handle's Lock, by its call's position
	nestedAt   map[token.Pos]bool                  // calls already reported as nested instances
	edges      []Edge
	positions  *positions
	decls      map[*types.Func]*ast.FuncDecl  // this package's functions, for unlockedParams
	unlocked   map[*types.Func][]unlockAlways // per function: the Unlocks of its params' holds
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

// pkgFuncLits visits the function literals in the values of package-level
// variables (var Run = func(…) {…}, a table of handlers). They have no
// summary (a call through a variable is not followed), but their bodies
// are checked as a function's are.
func (w *walker) pkgFuncLits(visit func(lit *ast.FuncLit)) {
	for _, f := range w.pass.Files {
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, spec := range gd.Specs {
				for _, v := range spec.(*ast.ValueSpec).Values {
					ast.Inspect(v, func(n ast.Node) bool {
						if lit, ok := n.(*ast.FuncLit); ok {
							visit(lit)
							return false
						}
						return true
					})
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
			w.walkFunc(fd, fd.Body)
			if len(w.cur) != len(w.sums[fn]) {
				w.sums[fn], changed = w.cur, true
			}
		})
	}
}

// walkFunc walks body, the body of fd or, when fd is nil, of a package
// variable's function literal.
func (w *walker) walkFunc(fd *ast.FuncDecl, body *ast.BlockStmt) {
	w.cur, w.perLock, w.held, w.spans, w.deferring = make(map[string]Acq), make(map[string]int), nil, nil, 0
	w.here, w.tmpl = newKeyRenderer(w.pass.TypesInfo, w.r.defs, fd)
	w.lockInputs = make(map[string]map[*types.Var]token.Pos)
	w.lockOps = make(map[token.Pos]op)
	ast.Inspect(body, func(n ast.Node) bool {
		if c, ok := n.(*ast.CallExpr); ok {
			if o, ok := w.r.op(c); ok && o.kind == opLock {
				w.lockOps[c.Pos()] = o
				if org := w.r.origin(o.ctx); org.kind == originVar {
					if w.lockInputs[o.pairKey()] == nil {
						w.lockInputs[o.pairKey()] = make(map[*types.Var]token.Pos)
					}
					if _, ok := w.lockInputs[o.pairKey()][org.v]; !ok {
						w.lockInputs[o.pairKey()][org.v] = c.Pos()
					}
				}
			}
		}
		return true
	})
	w.walk(body)
	if w.report {
		w.checkUseAfterUnlock(body)
	}
}

// detached walks n as code that does not run while the current locks are
// held and whose locks are not taken by a call of the current function:
// a goroutine, or a function literal that is not called on the spot.
func (w *walker) detached(n ast.Node) {
	cur, held, spans, deferring := w.cur, w.held, w.spans, w.deferring
	w.cur, w.held, w.spans, w.deferring = nil, nil, nil, 0
	w.walk(n)
	w.cur, w.held, w.spans, w.deferring = cur, held, spans, deferring
}

// inner walks the body of a function literal that runs here: what it
// Locks and does not Unlock stays held until it returns, not after.
func (w *walker) inner(body ast.Node) {
	spans := slices.Clone(w.spans)
	w.walk(body)
	w.spans = spans
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
			if h := w.carried(n.Value); h != nil {
				w.escaped(n.Value.Pos(), h, "escapes its critical section: sent on a channel (send a ctx from outside the hold)")
			}
		case *ast.IfStmt:
			w.ifStmt(n)
			return false
		case *ast.SwitchStmt:
			w.switchStmt(n.Init, n.Tag, n.Body, false)
			return false
		case *ast.TypeSwitchStmt:
			w.switchStmt(n.Init, n.Assign, n.Body, false)
			return false
		case *ast.SelectStmt:
			w.switchStmt(nil, nil, n.Body, true)
			return false
		case *ast.DeferStmt:
			w.deferring++
			w.walk(n.Call)
			w.deferring--
			return false
		case *ast.CallExpr:
			return w.call(n)
		}
		return true
	})
}

// call handles a call and reports whether to walk its children.
func (w *walker) call(c *ast.CallExpr) bool {
	if lit, ok := ast.Unparen(c.Fun).(*ast.FuncLit); ok { // func(){ … }(): runs here
		for _, a := range c.Args {
			w.walk(a)
		}
		w.inner(lit.Body)
		if w.deferring == 0 { // a deferred literal releases when the function returns
			w.releaseArgs(c.Args, w.unlocksAlways(lit.Body, lit.Type.Params), lit)
		}
		return false
	}
	o, ok := w.r.op(c)
	if !ok {
		if fn := typeutil.StaticCallee(w.pass.TypesInfo, c); fn != nil {
			w.through(c, fn, true)
		}
		w.releasesThrough(c)
		return true
	}
	switch o.kind {
	case opUnlock:
		w.checkUnlock(c, o)
		if w.deferring == 0 {
			w.release(o)
		}
		return true
	case opLock:
		w.acquire(c, o)
		if o.lock != "" {
			w.spans = append(w.spans, w.region(o, c))
		}
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
		reg := w.region(o, c)
		reg.lit = fn
		// fn's first parameter is the hold's ctx (a fenced lock's fn also
		// gets the token after it).
		if ps := fn.Type.Params.List; len(ps) >= 1 && len(ps[0].Names) >= 1 && ps[0].Names[0].Name != "_" {
			reg.ctx, _ = w.pass.TypesInfo.Defs[ps[0].Names[0]].(*types.Var)
		}
		w.held = append(w.held, reg)
		w.inner(fn.Body)
		w.held = w.held[:len(w.held)-1]
	case nil:
	default:
		// A named function run under the hold: what it takes, it takes while held.
		if f, ok := typeutil.Callee(w.pass.TypesInfo, &ast.CallExpr{Fun: fn}).(*types.Func); ok && !isInterfaceMethod(f) {
			w.held = append(w.held, w.region(o, c))
			w.through(c, f, false)
			w.held = w.held[:len(w.held)-1]
		} else {
			w.walk(fn)
		}
	}
	return false
}

// region is the hold o takes at c, with the instances it holds.
func (w *walker) region(o op, c *ast.CallExpr) region {
	reg := region{op: o, call: c, keys: make([][]string, len(o.members))}
	for i := range o.members {
		if i < len(o.inst) {
			reg.keys[i] = w.here.key(o.inst[i])
		}
	}
	return reg
}

// release ends the span of the Lock that the Unlock o undoes: the Lock
// that returned its ctx, else the last on the same handle and instance.
// An Unlock on a handle the analyzer cannot name ends the last span: a
// span left open would report a later instance that is not nested.
func (w *walker) release(o op) {
	if org := w.r.origin(o.ctx); org.kind == originLock {
		for i, s := range w.spans {
			if s.call.Pos() == org.at {
				w.spans = slices.Delete(w.spans, i, i+1)
				return
			}
		}
	}
	keys := w.region(o, nil).keys
	for i := len(w.spans) - 1; i >= 0; i-- {
		s := w.spans[i]
		if s.op.pairKey() != o.pairKey() {
			continue
		}
		same := true
		for j := range keys {
			if j < len(s.keys) && differ(keys[j], s.keys[j]) {
				same = false
			}
		}
		if same {
			w.spans = slices.Delete(w.spans, i, i+1)
			return
		}
	}
	if o.lock == "" && len(w.spans) > 0 {
		w.spans = w.spans[:len(w.spans)-1]
	}
}

// acquire records that the call takes o's locks: in the current
// function's summary, as edges from every lock held here, and checks the
// ctx it is given.
func (w *walker) acquire(c *ast.CallExpr, o op) {
	at := posn(w.pass.Fset, c.Pos())
	for i, m := range o.members {
		var in instArgs
		if i < len(o.inst) {
			in = o.inst[i]
		}
		a := Acq{Lock: m, At: at, Permit: o.permit, Key: w.tmpl.key(in), Mode: o.mode, NoWait: o.noWait}
		if i < len(o.kinds) {
			a.Kind = o.kinds[i]
		}
		w.take(a, w.here.key(in), c.Pos())
	}
	w.checkCtx(c, o)
}

// through takes at c what fn takes: c calls fn (called), or runs it
// under a hold (fn is a With<Name>'s or a Do's fn, whose params the
// analyzer does not map to the instances fn takes).
func (w *walker) through(c *ast.CallExpr, fn *types.Func, called bool) {
	var recv ast.Expr
	var args []ast.Expr
	if called {
		recv, args = callArgs(w.pass.TypesInfo, c, fn)
	}
	for _, a := range w.summary(fn) {
		b := a
		b.At, b.Through, b.ThroughAt = posn(w.pass.Fset, c.Pos()), funcName(fn), a.At
		b.Key = w.tmpl.substitute(a.Key, recv, args)
		w.take(b, w.here.substitute(a.Key, recv, args), c.Pos())
	}
}

// take records that lock a.Lock (the instance here, rendered in this
// function) is taken at pos: in the function's summary, as lock-order
// edges from every lock held here (unless a.NoWait), and as nested
// instances.
func (w *walker) take(a Acq, here []string, pos token.Pos) {
	if w.cur != nil {
		if k := a.sumKey(); w.cur[k].Lock == "" && w.perLock[a.Lock] < maxInstances {
			w.cur[k] = a
			w.perLock[a.Lock]++
		}
	}
	if !w.report || w.ign.covers(w.pass.Fset, pos) {
		return
	}
	w.checkNested(a, here, pos)
	for _, h := range w.held {
		for _, m := range h.op.members {
			if m == a.Lock {
				return // held already: a re-entry takes nothing new (or a self-deadlock, reported on its own)
			}
		}
	}
	if a.NoWait {
		// A try with a wait of 0 fails rather than waits: it cannot close
		// a deadlock cycle, and try-and-back-off is the usual way out of
		// an inversion. What it holds afterwards still orders later locks.
		return
	}
	for _, h := range w.held {
		for _, from := range h.op.members {
			if from != a.Lock {
				w.edges = append(w.edges, Edge{From: from, To: a.Lock, At: a.At, Held: posn(w.pass.Fset, h.call.Pos()),
					Through: a.Through, ThroughAt: a.ThroughAt, FromPermit: h.op.permit, ToPermit: a.Permit})
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

// finding reports msg at pos, unless a //lockgen:ignore covers it, with
// notes as related information.
func (w *walker) finding(pos token.Pos, category, msg string, notes ...analysis.RelatedInformation) {
	if !w.report || w.ign.covers(w.pass.Fset, pos) {
		return
	}
	w.pass.Report(analysis.Diagnostic{Pos: pos, Category: category, Message: msg, Related: notes})
}

// note is related information at a position of this package.
func note(pos token.Pos, msg string) analysis.RelatedInformation {
	return analysis.RelatedInformation{Pos: pos, Message: msg}
}

// isInterfaceMethod reports whether fn is an interface's method: which
// function a call of it runs is not known statically.
func isInterfaceMethod(fn *types.Func) bool {
	recv := fn.Signature().Recv()
	return recv != nil && types.IsInterface(recv.Type())
}
