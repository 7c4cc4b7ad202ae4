package templates

import (
	"strings"
	"time"

	"github.com/dave/jennifer/jen"
)

// Reentrant emits a reentrant lock: its options, its key function, the
// handle constructor <Name> returning a *runtime.Mutex and With<Name>.
func Reentrant(l *Lock) jen.Code {
	mutex := jen.Op("*").Qual(runtimePkg, "Mutex")
	cfg := configLines(l)
	code := jen.Add(
		comment(append(append([]string{
			l.Name + " returns the handle of the reentrant lock " + l.Name + for_(l) + ",",
			"for Lock, TryLock and Unlock, and IsLocked, HoldCount, RemainTTL and ForceUnlock.",
		}, docBlock(l)...), cfg...)...),
		jen.Line(),
	)
	opts := jen.Id(optionsVarName(l))
	if l.fallible() {
		code.Func().Params(jen.Id("l").Op("*").Id("Locks")).Id(l.Name).Params(paramList(l)...).Params(mutex, jen.Error()).Block(
			jen.List(jen.Id("key"), jen.Err()).Op(":=").Id(keyFuncName(l)).Call(argList(l)...),
			jen.If(jen.Err().Op("!=").Nil()).Block(
				jen.Return(jen.Nil(), jen.Op("&").Qual(runtimePkg, "LockError").Values(jen.Dict{
					jen.Id("Op"):   jen.Lit("acquire"),
					jen.Id("Name"): jen.Lit(l.Name),
					jen.Id("Err"):  jen.Qual("errors", "Join").Call(jen.Qual(runtimePkg, "ErrInvalidKey"), jen.Err()),
				})),
			),
			jen.Return(jen.Id("l").Dot("c").Dot("Mutex").Call(jen.Id("key"), opts), jen.Nil()),
		)
	} else {
		code.Func().Params(jen.Id("l").Op("*").Id("Locks")).Id(l.Name).Params(paramList(l)...).Add(mutex).Block(
			jen.Return(jen.Id("l").Dot("c").Dot("Mutex").Call(jen.Id(keyFuncName(l)).Call(argList(l)...), opts)),
		)
	}
	code.Line().Line()
	code.Add(comment(append([]string{
		"With" + l.Name + " runs fn while holding " + l.Name + for_(l) + ".",
		waitSentence(l.WaitTime),
		"fn gets the ctx of the hold: it is cancelled if the lock is lost, and a",
		"nested call with that ctx re-enters the lock.",
	}, cfg...)...))
	code.Line()
	params := append(append([]jen.Code{jen.Id("ctx").Qual("context", "Context")}, paramList(l)...),
		jen.Id("fn").Func().Params(jen.Id("ctx").Qual("context", "Context")).Error())
	if l.fallible() {
		code.Func().Params(jen.Id("l").Op("*").Id("Locks")).Id("With"+l.Name).Params(params...).Error().Block(
			jen.List(jen.Id("m"), jen.Err()).Op(":=").Id("l").Dot(l.Name).Call(argList(l)...),
			jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Err())),
			jen.Return(jen.Id("m").Dot("Do").Call(jen.Id("ctx"), jen.Id("fn"))),
		)
	} else {
		code.Func().Params(jen.Id("l").Op("*").Id("Locks")).Id("With" + l.Name).Params(params...).Error().Block(
			// Not l.<Name>(...): building the Mutex here lets the compiler
			// keep it on the stack, so the helper allocates no more than
			// the runtime call it wraps.
			jen.Return(jen.Id("l").Dot("c").Dot("Mutex").Call(jen.Id(keyFuncName(l)).Call(argList(l)...), opts).Dot("Do").Call(jen.Id("ctx"), jen.Id("fn"))),
		)
	}
	code.Line().Line()
	code.Var().Add(opts).Op("=").Qual(runtimePkg, "LockOptions").Values(
		jen.Line().Id("Name").Op(":").Lit(l.Name),
		jen.Line().Id("Lease").Op(":").Add(leaseCode(l.Lease)),
		jen.Line().Id("WaitTime").Op(":").Add(waitCode(l.WaitTime)),
		jen.Line(),
	)
	code.Line().Line()
	code.Add(keyFunc(l))
	return code
}

// for_ names the params a lock is taken for: " for orderID", " for tenant and day".
func for_(l *Lock) string {
	if len(l.Params) == 0 {
		return ""
	}
	names := make([]string, len(l.Params))
	for i, p := range l.Params {
		names[i] = p.Name
	}
	if len(names) == 1 {
		return " for " + names[0]
	}
	return " for " + strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// waitSentence says how a With<Name> call waits.
func waitSentence(d time.Duration) string {
	switch {
	case d < 0:
		return "It waits for the lock until ctx is done, and releases it when fn returns."
	case d == 0:
		return "It tries once (runtime.ErrNotAcquired if taken), and releases the lock when fn returns."
	}
	return "It waits up to " + d.String() + " for the lock, and releases it when fn returns."
}

// docBlock is the spec's doc, set off by blank comment lines.
func docBlock(l *Lock) []string {
	lines := docLines(l.Doc)
	if len(lines) == 0 {
		return nil
	}
	return append([]string{""}, lines...)
}

// configLines is the lock's configuration as a code block, so that go doc
// reviews it: kind, key pattern, lease and wait time.
func configLines(l *Lock) []string {
	return []string{
		"",
		"\tkind:     " + l.Kind,
		"\tkey:      " + l.Key,
		"\tlease:    " + leaseText(l.Lease),
		"\twaitTime: " + waitText(l.WaitTime),
	}
}
