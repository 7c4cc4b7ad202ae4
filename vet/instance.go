package vet

import (
	"go/ast"
	"go/token"
	"go/types"
	"strconv"
	"strings"
)

// An instance of a lock is the lock and the values of its params:
// LedgerLock(from) and LedgerLock(to) are two instances of LedgerLock,
// two Redis keys. The analyzer does not know values; it compares the
// params' expressions. Two instances whose params are written alike (the
// same variable, or variables assigned once from the same expression)
// are taken to be one, a re-entry; two written differently may be two,
// and nested they deadlock against a caller that nests them the other
// way round.
//
// A key is one string per param of the lock, "" where the analyzer cannot
// name the param. It is rendered in one of two modes:
//
//   - here: as the function being walked sees it, to compare two
//     instances in one function (and to name them in a finding);
//   - template: relative to the function's own parameters (the receiver
//     is hole+"r"+hole, parameter i hole+i+hole), for the function's
//     summary, so a caller can substitute its arguments. A param that
//     depends on the function's locals cannot be substituted: "".
const hole = "\x00"

// maxKey bounds a rendered param: a recursive function that passes
// id+1 on would otherwise grow its summary's templates without end.
const maxKey = 200

// instArgs are the param expressions of one member of an acquisition.
type instArgs struct {
	known bool
	args  []ast.Expr // a nil entry: a param the analyzer cannot name
}

// keyRenderer renders param expressions of the function fd.
type keyRenderer struct {
	info     *types.Info
	defs     *defs
	params   map[*types.Var]string // fd's receiver ("r") and parameters ("0", "1", …)
	template bool
}

func newKeyRenderer(info *types.Info, d *defs, fd *ast.FuncDecl) (here, template *keyRenderer) {
	params := make(map[*types.Var]string)
	if fd != nil {
		if fd.Recv != nil {
			for _, f := range fd.Recv.List {
				for _, n := range f.Names {
					if v, ok := info.Defs[n].(*types.Var); ok {
						params[v] = "r"
					}
				}
			}
		}
		i := 0
		for _, f := range fd.Type.Params.List {
			if len(f.Names) == 0 {
				i++
			}
			for _, n := range f.Names {
				if v, ok := info.Defs[n].(*types.Var); ok {
					params[v] = strconv.Itoa(i)
				}
				i++
			}
		}
	}
	return &keyRenderer{info: info, defs: d, params: params},
		&keyRenderer{info: info, defs: d, params: params, template: true}
}

// key renders one member's params, nil when they are not known.
func (k *keyRenderer) key(in instArgs) []string {
	if !in.known {
		return nil
	}
	out := make([]string, len(in.args))
	for i, a := range in.args {
		if a != nil {
			out[i], _ = k.render(a, 0)
		}
	}
	return out
}

// render writes e in a canonical form: constants by value, package-level
// names qualified by their package's name, variables assigned once by
// what they were assigned. It fails on expressions it does not follow
// (function literals, composite literals, receives) and, in template
// mode, on the function's locals.
func (k *keyRenderer) render(e ast.Expr, depth int) (string, bool) {
	if depth > 8 {
		return "", false
	}
	e = ast.Unparen(e)
	if tv, ok := k.info.Types[e]; ok && tv.Value != nil {
		return tv.Value.ExactString(), true
	}
	switch x := e.(type) {
	case *ast.Ident:
		switch obj := k.info.ObjectOf(x).(type) {
		case *types.Var:
			if p, ok := k.params[obj]; ok {
				if k.template {
					return hole + p + hole, true
				}
				return x.Name, true
			}
			if obj.Pkg() != nil && obj.Parent() == obj.Pkg().Scope() {
				return obj.Pkg().Name() + "." + obj.Name(), true
			}
			if d, ok := k.defs.single(obj); ok && d.index == 0 {
				if s, ok := k.render(d.expr, depth+1); ok {
					return k.wrap(d.expr, s), true
				}
			}
			if k.template {
				return "", false
			}
			return x.Name, true
		case *types.Nil:
			return "nil", true
		case nil:
			return "", false
		default: // a type, a function, a builtin
			if obj.Pkg() != nil && obj.Parent() == obj.Pkg().Scope() {
				return obj.Pkg().Name() + "." + obj.Name(), true
			}
			return obj.Name(), true
		}
	case *ast.SelectorExpr:
		if id, ok := x.X.(*ast.Ident); ok {
			if pn, ok := k.info.Uses[id].(*types.PkgName); ok {
				return pn.Imported().Name() + "." + x.Sel.Name, true
			}
		}
		base := derefOf(x.X) // p.ID and (*p).ID, (&o).ID and o.ID select one field
		s, ok := k.render(base, depth+1)
		return k.wrap(base, s) + "." + x.Sel.Name, ok
	case *ast.IndexExpr:
		s, ok := k.render(x.X, depth+1)
		i, iok := k.render(x.Index, depth+1)
		return k.wrap(x.X, s) + "[" + i + "]", ok && iok
	case *ast.StarExpr:
		s, ok := k.render(x.X, depth+1)
		return "*" + k.wrap(x.X, s), ok
	case *ast.UnaryExpr:
		if x.Op == token.ARROW {
			return "", false // each receive is another value
		}
		s, ok := k.render(x.X, depth+1)
		return x.Op.String() + k.wrap(x.X, s), ok
	case *ast.BinaryExpr:
		l, lok := k.render(x.X, depth+1)
		r, rok := k.render(x.Y, depth+1)
		return k.wrap(x.X, l) + " " + x.Op.String() + " " + k.wrap(x.Y, r), lok && rok
	case *ast.CallExpr:
		f, ok := k.render(x.Fun, depth+1)
		args := make([]string, len(x.Args))
		for i, a := range x.Args {
			var aok bool
			args[i], aok = k.render(a, depth+1)
			ok = ok && aok
		}
		dots := ""
		if x.Ellipsis.IsValid() {
			dots = "..."
		}
		return f + "(" + strings.Join(args, ", ") + dots + ")", ok
	}
	return "", false
}

// wrap parenthesises the rendering of e where it is not a primary
// expression, so that a substituted operand keeps its meaning.
func (k *keyRenderer) wrap(e ast.Expr, s string) string {
	if primary(k.info, e) {
		return s
	}
	return "(" + s + ")"
}

func primary(info *types.Info, e ast.Expr) bool {
	e = ast.Unparen(e)
	if tv, ok := info.Types[e]; ok && tv.Value != nil {
		return !strings.HasPrefix(tv.Value.ExactString(), "-")
	}
	switch e.(type) {
	case *ast.Ident, *ast.SelectorExpr, *ast.IndexExpr, *ast.CallExpr, *ast.BasicLit:
		return true
	}
	return false
}

// derefOf is x for &x and *x, else e: the operand a field is selected from.
func derefOf(e ast.Expr) ast.Expr {
	switch x := ast.Unparen(e).(type) {
	case *ast.StarExpr:
		return x.X
	case *ast.UnaryExpr:
		if x.Op == token.AND {
			return x.X
		}
	}
	return e
}

// substitute fills the holes of a callee's key templates with the
// arguments of call (recv and args as the callee's receiver and
// parameters; a nil one is unknown), rendered by k.
func (k *keyRenderer) substitute(tmpl []string, recv ast.Expr, args []ast.Expr) []string {
	if tmpl == nil {
		return nil
	}
	out := make([]string, len(tmpl))
	for i, t := range tmpl {
		if t == "" {
			continue
		}
		parts := strings.Split(t, hole)
		alone := len(parts) == 3 && parts[0] == "" && parts[2] == ""
		var b strings.Builder
		ok := true
		for j, p := range parts {
			if j%2 == 0 {
				b.WriteString(p)
				continue
			}
			var a ast.Expr
			if p == "r" {
				a = recv
			} else if n, err := strconv.Atoi(p); err == nil && n < len(args) {
				a = args[n]
			}
			if a != nil && j+1 < len(parts) && strings.HasPrefix(parts[j+1], ".") {
				a = derefOf(a) // a helper given &o that locks by o.ID locks by the caller's o.ID
			}
			if a == nil {
				ok = false
				break
			}
			s, aok := k.render(a, 0)
			if !aok {
				ok = false
				break
			}
			if !alone {
				s = k.wrap(a, s)
			}
			b.WriteString(s)
		}
		if ok && b.Len() <= maxKey {
			out[i] = b.String()
		}
	}
	return out
}

// callArgs maps a static call of fn to fn's receiver and parameters: the
// expressions a callee's key templates are filled with. A parameter that
// no single expression gives (variadic arguments) is nil.
func callArgs(info *types.Info, c *ast.CallExpr, fn *types.Func) (recv ast.Expr, args []ast.Expr) {
	sig := fn.Signature()
	args = c.Args
	if sig.Recv() != nil {
		sel, ok := ast.Unparen(c.Fun).(*ast.SelectorExpr)
		if !ok {
			return nil, nil
		}
		switch s := info.Selections[sel]; {
		case s == nil:
			return nil, nil
		case s.Kind() == types.MethodExpr && len(args) > 0:
			recv, args = args[0], args[1:]
		case s.Kind() == types.MethodVal && len(s.Index()) == 1:
			recv = sel.X // a promoted method's receiver is a field of sel.X
		}
	}
	if sig.Variadic() && !c.Ellipsis.IsValid() {
		n := sig.Params().Len() - 1
		if len(args) > n {
			args = args[:n]
		}
	}
	return recv, args
}

// differ reports whether two keys of one lock may name two instances:
// some param both name is written differently. A param either cannot
// name is no evidence: the two may well be one instance.
func differ(a, b []string) bool {
	if a == nil || b == nil || len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != "" && b[i] != "" && a[i] != b[i] {
			return true
		}
	}
	return false
}

// instanceName is how a finding names an instance: locks.LedgerLock(to).
func instanceName(lock string, key []string) string {
	return display(lock) + "(" + keyList(key) + ")"
}

// keyList writes a key's params as a call's arguments, … for one the
// analyzer cannot name.
func keyList(key []string) string {
	parts := make([]string, len(key))
	for i, p := range key {
		parts[i] = p
		if p == "" {
			parts[i] = "…"
		}
	}
	return strings.Join(parts, ", ")
}
