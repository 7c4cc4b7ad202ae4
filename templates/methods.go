package templates

import "github.com/dave/jennifer/jen"

// The pieces every kind assembles: the handle constructor <Name>, the
// With helpers, and the options variable. A kind supplies what differs:
// the runtime constructor (ctor), the handle's type, and for a read-write
// lock the side of the handle a helper holds.

// ctorFunc builds the handle of l from its rendered key, e.g.
// l.c.Mutex(key, orderLockOptions).
type ctorFunc func(key jen.Code) *jen.Statement

// clientCtor is a ctorFunc calling the runtime.Client method method with
// the lock's options.
func clientCtor(l *Lock, method string) ctorFunc {
	return func(key jen.Code) *jen.Statement {
		return jen.Id("l").Dot("c").Dot(method).Call(key, jen.Id(optionsVarName(l)))
	}
}

// keyCall renders the key of l from the params, by name.
func keyCall(l *Lock) jen.Code { return jen.Id(keyFuncName(l)).Call(argList(l)...) }

// buildFunc is the expression that builds the handle of l from its params,
// for a lock whose handle cannot fail to build.
type buildFunc func() *jen.Statement

// keyed builds the handle with ctor from the rendered key.
func keyed(l *Lock, ctor ctorFunc) buildFunc {
	return func() *jen.Statement { return ctor(keyCall(l)) }
}

// handleFunc emits the handle constructor <Name>(params) typ. When the key
// can fail to render, it returns (typ, error) and the error is a
// *runtime.LockError wrapping runtime.ErrInvalidKey.
func handleFunc(l *Lock, doc []string, typ jen.Code, ctor ctorFunc) jen.Code {
	sig := handleSig(l, doc)
	if !l.fallible() {
		return sig.Add(typ).Block(jen.Return(ctor(keyCall(l))))
	}
	return sig.Params(typ, jen.Error()).Block(
		jen.List(jen.Id("key"), jen.Err()).Op(":=").Add(keyCall(l)),
		jen.If(jen.Err().Op("!=").Nil()).Block(
			jen.Return(jen.Nil(), jen.Op("&").Qual(runtimePkg, "LockError").Values(jen.Dict{
				jen.Id("Op"):   jen.Lit("acquire"),
				jen.Id("Name"): jen.Lit(l.Name),
				jen.Id("Err"):  jen.Qual("errors", "Join").Call(jen.Qual(runtimePkg, "ErrInvalidKey"), jen.Err()),
			})),
		),
		jen.Return(ctor(jen.Id("key")), jen.Nil()),
	)
}

// handleSig is the doc comment and the signature up to the results of the
// handle constructor: func (l *Locks) <Name>(params).
func handleSig(l *Lock, doc []string) *jen.Statement {
	return jen.Add(comment(doc...), jen.Line()).
		Func().Params(jen.Id("l").Op("*").Id("Locks")).Id(l.Name).Params(paramList(l)...)
}

// withFunc emits name(ctx, params, fn), which runs fn holding what side
// picks from the handle: a side of a read-write lock, or the handle itself.
func withFunc(l *Lock, name string, doc []string, build buildFunc, side func(handle *jen.Statement) *jen.Statement) jen.Code {
	params := append(append([]jen.Code{jen.Id("ctx").Qual("context", "Context")}, paramList(l)...),
		jen.Id("fn").Func().Params(jen.Id("ctx").Qual("context", "Context")).Error())
	sig := jen.Func().Params(jen.Id("l").Op("*").Id("Locks")).Id(name).Params(params...).Error()
	do := func(handle *jen.Statement) jen.Code {
		return side(handle).Dot("Do").Call(jen.Id("ctx"), jen.Id("fn"))
	}
	code := jen.Add(comment(doc...), jen.Line())
	if l.fallible() {
		return code.Add(sig.Block(
			jen.List(jen.Id("m"), jen.Err()).Op(":=").Id("l").Dot(l.Name).Call(argList(l)...),
			jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Err())),
			jen.Return(do(jen.Id("m"))),
		))
	}
	// Not l.<Name>(...): building the handle here lets the compiler keep
	// it on the stack, so the helper allocates no more than the runtime
	// call it wraps.
	return code.Add(sig.Block(jen.Return(do(build()))))
}

// wholeHandle is the side of a handle that is held as a whole.
func wholeHandle(handle *jen.Statement) *jen.Statement { return handle }

// optionsVar emits the lock's runtime.LockOptions: name, lease and wait
// time, then the kind's own fields, then SyncReplicas when set.
func optionsVar(l *Lock, fields ...jen.Code) jen.Code {
	values := append([]jen.Code{
		option("Name", jen.Lit(l.Name)),
		option("Lease", leaseCode(l.Lease)),
		option("WaitTime", waitCode(l.WaitTime)),
	}, fields...)
	if l.SyncReplicas > 0 {
		values = append(values, option("SyncReplicas", jen.Lit(l.SyncReplicas)))
	}
	return jen.Var().Id(optionsVarName(l)).Op("=").Qual(runtimePkg, "LockOptions").Values(append(values, jen.Line())...)
}

// option is one field of a LockOptions literal, on its own line.
func option(name string, value jen.Code) jen.Code {
	return jen.Line().Id(name).Op(":").Add(value)
}

// lockDecls joins a kind's declarations with blank lines and ends with the
// options variable and the key function, which every kind with a key has.
func lockDecls(l *Lock, options []jen.Code, decls ...jen.Code) jen.Code {
	return joinDecls(append(decls, optionsVar(l, options...), keyFunc(l))...)
}

// joinDecls joins declarations with blank lines.
func joinDecls(decls ...jen.Code) jen.Code {
	code := jen.Null()
	for i, d := range decls {
		if i > 0 {
			code.Line().Line()
		}
		code.Add(d)
	}
	return code
}
