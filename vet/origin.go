package vet

import (
	"go/ast"
	"go/token"
	"go/types"

	"golang.org/x/tools/go/types/typeutil"
)

// def is one assignment to a local variable: the expression, and which of
// its results the variable got (a, b := f() gives b index 1).
type def struct {
	expr  ast.Expr
	index int
}

// defs holds every assignment to the package's local variables, so a
// variable assigned exactly once can be followed to where its value came
// from. A variable assigned more than once, or whose address is taken, is
// not followed: its value at a use is unknown to a syntactic check.
type defs struct {
	m    map[*types.Var][]def
	lost map[*types.Var]bool
}

func collectDefs(info *types.Info, files []*ast.File) *defs {
	d := &defs{m: make(map[*types.Var][]def), lost: make(map[*types.Var]bool)}
	add := func(lhs []ast.Expr, rhs []ast.Expr) {
		for i, l := range lhs {
			id, ok := ast.Unparen(l).(*ast.Ident)
			if !ok {
				continue
			}
			v, ok := info.ObjectOf(id).(*types.Var)
			if !ok {
				continue
			}
			switch {
			case len(rhs) == len(lhs):
				d.m[v] = append(d.m[v], def{rhs[i], 0})
			case len(rhs) == 1:
				d.m[v] = append(d.m[v], def{rhs[0], i})
			default:
				d.lost[v] = true
			}
		}
	}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.AssignStmt:
				if n.Tok == token.ASSIGN || n.Tok == token.DEFINE {
					add(n.Lhs, n.Rhs)
				} else {
					for _, l := range n.Lhs {
						d.lose(info, l)
					}
				}
			case *ast.ValueSpec:
				lhs := make([]ast.Expr, len(n.Names))
				for i, id := range n.Names {
					lhs[i] = id
				}
				if len(n.Values) > 0 {
					add(lhs, n.Values)
				}
			case *ast.UnaryExpr:
				if n.Op == token.AND {
					d.lose(info, n.X)
				}
			case *ast.RangeStmt:
				d.lose(info, n.Key)
				d.lose(info, n.Value)
			case *ast.IncDecStmt:
				d.lose(info, n.X)
			}
			return true
		})
	}
	return d
}

func (d *defs) lose(info *types.Info, e ast.Expr) {
	if id, ok := ast.Unparen(e).(*ast.Ident); ok {
		if v, ok := info.ObjectOf(id).(*types.Var); ok {
			d.lost[v] = true
		}
	}
}

func (d *defs) single(v *types.Var) (def, bool) {
	if d.lost[v] || len(d.m[v]) != 1 {
		return def{}, false
	}
	return d.m[v][0], true
}

type originKind int

const (
	originUnknown    originKind = iota
	originVar                   // a variable not followed further: a parameter (e.g. a hold's ctx) or a captured ctx
	originBackground            // context.Background() or context.TODO()
	originLock                  // the ctx a Lock or TryLock returned
)

// origin is where a ctx value comes from.
type origin struct {
	kind   originKind
	v      *types.Var // originVar
	handle string     // originLock: which handle's Lock
	at     token.Pos  // originBackground, originLock: the call
}

// derivers are the context functions whose result carries their parent's
// values, and so the hold a parent ctx carries.
var derivers = map[string]bool{
	"WithCancel": true, "WithCancelCause": true, "WithTimeout": true, "WithTimeoutCause": true,
	"WithDeadline": true, "WithDeadlineCause": true, "WithValue": true, "WithoutCancel": true,
}

// origin follows a ctx expression back through single assignments and
// context.With* derivations.
func (r *resolver) origin(e ast.Expr) origin {
	for depth := 0; depth < 16; depth++ {
		e = ast.Unparen(e)
		switch x := e.(type) {
		case *ast.Ident:
			v, ok := r.pass.TypesInfo.Uses[x].(*types.Var)
			if !ok {
				return origin{}
			}
			d, ok := r.defs.single(v)
			if !ok {
				if len(r.defs.m[v]) == 0 && !r.defs.lost[v] {
					return origin{kind: originVar, v: v}
				}
				return origin{}
			}
			call, isCall := ast.Unparen(d.expr).(*ast.CallExpr)
			switch {
			case d.index == 0 && !isCall:
				e = d.expr
				continue
			case isCall && d.index == 0:
				if o, ok := r.op(call); ok && o.kind == opLock {
					return origin{kind: originLock, handle: o.handle, at: call.Pos()}
				}
				e = d.expr
				continue
			}
			return origin{}
		case *ast.CallExpr:
			fn, ok := typeutil.Callee(r.pass.TypesInfo, x).(*types.Func)
			if !ok || fn.Pkg() == nil {
				return origin{}
			}
			if fn.Pkg().Path() == "context" {
				switch {
				case fn.Name() == "Background" || fn.Name() == "TODO":
					return origin{kind: originBackground, at: x.Pos()}
				case derivers[fn.Name()] && len(x.Args) > 0:
					e = x.Args[0]
					continue
				}
				return origin{}
			}
			if o, ok := r.op(x); ok && o.kind == opLock {
				return origin{kind: originLock, handle: o.handle, at: x.Pos()}
			}
			return origin{}
		default:
			return origin{}
		}
	}
	return origin{}
}
