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

// handleFunc emits the handle constructor <Name>(params) typ. When the key
// can fail to render, it returns (typ, error) and the error is a
// *runtime.LockError wrapping runtime.ErrInvalidKey.
func handleFunc(l *Lock, doc []string, typ jen.Code, ctor ctorFunc) jen.Code {
	code := jen.Add(comment(doc...), jen.Line())
	sig := jen.Func().Params(jen.Id("l").Op("*").Id("Locks")).Id(l.Name).Params(paramList(l)...)
	if !l.fallible() {
		return code.Add(sig.Add(typ).Block(jen.Return(ctor(keyCall(l)))))
	}
	return code.Add(sig.Params(typ, jen.Error()).Block(
		jen.List(jen.Id("key"), jen.Err()).Op(":=").Add(keyCall(l)),
		jen.If(jen.Err().Op("!=").Nil()).Block(
			jen.Return(jen.Nil(), jen.Op("&").Qual(runtimePkg, "LockError").Values(jen.Dict{
				jen.Id("Op"):   jen.Lit("acquire"),
				jen.Id("Name"): jen.Lit(l.Name),
				jen.Id("Err"):  jen.Qual("errors", "Join").Call(jen.Qual(runtimePkg, "ErrInvalidKey"), jen.Err()),
			})),
		),
		jen.Return(ctor(jen.Id("key")), jen.Nil()),
	))
}

// withFunc emits name(ctx, params, fn), which runs fn holding the
// *runtime.Mutex that side picks from the handle (the handle itself for
// a Mutex kind).
func withFunc(l *Lock, name string, doc []string, ctor ctorFunc, side func(handle *jen.Statement) *jen.Statement) jen.Code {
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
	return code.Add(sig.Block(jen.Return(do(ctor(keyCall(l))))))
}

// wholeHandle is the side of a handle that is itself a *runtime.Mutex.
func wholeHandle(handle *jen.Statement) *jen.Statement { return handle }

// optionsVar emits the lock's runtime.LockOptions: name, lease and wait
// time, then the kind's own fields.
func optionsVar(l *Lock, fields ...jen.Code) jen.Code {
	values := append([]jen.Code{
		option("Name", jen.Lit(l.Name)),
		option("Lease", leaseCode(l.Lease)),
		option("WaitTime", waitCode(l.WaitTime)),
	}, fields...)
	return jen.Var().Id(optionsVarName(l)).Op("=").Qual(runtimePkg, "LockOptions").Values(append(values, jen.Line())...)
}

// option is one field of a LockOptions literal, on its own line.
func option(name string, value jen.Code) jen.Code {
	return jen.Line().Id(name).Op(":").Add(value)
}

// lockDecls joins a kind's declarations with blank lines and ends with the
// options variable and the key function, which every kind has.
func lockDecls(l *Lock, options []jen.Code, decls ...jen.Code) jen.Code {
	code := jen.Null()
	for i, d := range append(decls, optionsVar(l, options...), keyFunc(l)) {
		if i > 0 {
			code.Line().Line()
		}
		code.Add(d)
	}
	return code
}
