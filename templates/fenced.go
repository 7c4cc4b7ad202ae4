package templates

import "github.com/dave/jennifer/jen"

// Fenced emits a fenced reentrant lock: the handle constructor <Name>
// returning a *runtime.FencedLock, With<Name> whose fn also gets the
// acquisition's fencing token, its options and its key function.
func Fenced(l *Lock) jen.Code {
	cfg := configLines(l, configLine("fenced", "yes: each acquisition gets a token from redisson_lock_token:{<key>}"))
	ctor := clientCtor(l, "FencedLock")
	handle := handleFunc(l, lines([]string{
		l.Name + " returns the handle of the fenced reentrant lock " + l.Name + for_(l) + ",",
		"for LockFenced and TryLockFenced (which return the fencing token), Unlock,",
		"Token, and IsLocked, HoldCount, RemainTTL and ForceUnlock.",
	}, docBlock(l), cfg), jen.Op("*").Qual(runtimePkg, "FencedLock"), ctor)
	fn := jen.Id("fn").Func().Params(jen.Id("ctx").Qual("context", "Context"), jen.Id("fence").Int64()).Error()
	with := handleHelper(l, "With"+l.Name, lines([]string{
		"With" + l.Name + " runs fn while holding " + l.Name + for_(l) + ".",
		waitSentence(l.WaitTime),
		"",
		"fn gets the ctx of the hold, cancelled if the lock is lost (a nested call",
		"with it re-enters the lock), and the acquisition's fencing token: a number",
		"that grows with every acquisition by anyone. Send it with every write to the",
		"storage the lock guards, and have the storage refuse a token lower than the",
		"highest it has seen: that stops a holder that was paused past its lease.",
	}, valueDoc(l, ""), cfg), []jen.Code{fn}, []jen.Code{jen.Error()}, keyed(l, ctor),
		func(h *jen.Statement) jen.Code {
			return jen.Return(h.Dot("DoFenced").Call(jen.Id("ctx"), jen.Id("fn")))
		},
		jen.Return(jen.Err()))
	return lockDecls(l, nil, handle, with)
}

// handleHelper emits name(ctx, params, extra...) results, whose body is
// body applied to the lock's handle. When the handle can fail to build,
// the helper builds it first and returns fail (its results with the
// error err) if that fails; its local for the handle is h, or h_ (h__ ...)
// when a param takes that name.
func handleHelper(l *Lock, name string, doc []string, extra, results []jen.Code, build buildFunc, body func(handle *jen.Statement) jen.Code, fail jen.Code) jen.Code {
	params := append(append([]jen.Code{jen.Id("ctx").Qual("context", "Context")}, paramList(l)...), extra...)
	sig := jen.Func().Params(jen.Id("l").Op("*").Id("Locks")).Id(name).Params(params...)
	if len(results) == 1 {
		sig = sig.Add(results[0])
	} else {
		sig = sig.Params(results...)
	}
	code := jen.Add(comment(doc...), jen.Line())
	if l.fallible() {
		taken := map[string]bool{}
		for _, p := range l.Params {
			taken[p.Name] = true
		}
		h := "h"
		for taken[h] {
			h += "_"
		}
		return code.Add(sig.Block(
			jen.List(jen.Id(h), jen.Err()).Op(":=").Id("l").Dot(l.Name).Call(argList(l)...),
			jen.If(jen.Err().Op("!=").Nil()).Block(fail),
			body(jen.Id(h)),
		))
	}
	return code.Add(sig.Block(body(build())))
}
