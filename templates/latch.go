package templates

import (
	"strconv"

	"github.com/dave/jennifer/jen"
)

// Latch emits a count-down latch: the handle constructor <Name> returning
// a *runtime.Latch, Arm<Name>, Await<Name> and CountDown<Name>, its
// options (a runtime.LatchOptions with the count) and its key function.
func Latch(l *Lock) jen.Code {
	count := strconv.Itoa(l.Count)
	cfg := configLines(l, configLine("count", count+" (what Arm"+l.Name+" sets)"))
	ctor := clientCtor(l, "Latch")
	handle := handleFunc(l, lines([]string{
		l.Name + " returns the handle of the count-down latch " + l.Name + for_(l) + ",",
		"for TrySetCount, CountDown, Count, Await, TryAwait and Delete.",
	}, docBlock(l), cfg), jen.Op("*").Qual(runtimePkg, "Latch"), ctor)
	build := keyed(l, ctor)
	ctx := jen.Id("ctx")
	arm := handleHelper(l, "Arm"+l.Name, lines([]string{
		"Arm" + l.Name + " arms " + l.Name + for_(l) + " with the count " + count + ", only if it is not",
		"armed; it reports whether it did. A latch that reached zero is deleted,",
		"and nothing but this arms it again.",
	}, cfg), nil, []jen.Code{jen.Bool(), jen.Error()}, build,
		func(h *jen.Statement) jen.Code { return jen.Return(h.Dot("Arm").Call(ctx)) },
		jen.Return(jen.False(), jen.Err()))
	await := handleHelper(l, "Await"+l.Name, lines([]string{
		"Await" + l.Name + " waits until " + l.Name + for_(l) + " has been counted down to",
		"zero (or is not armed). " + latchWaitSentence(l),
	}, cfg), nil, []jen.Code{jen.Error()}, build,
		func(h *jen.Statement) jen.Code {
			return jen.Return(h.Dot("TryAwait").Call(ctx, jen.Id(optionsVarName(l)).Dot("WaitTime")))
		},
		jen.Return(jen.Err()))
	countDown := handleHelper(l, "CountDown"+l.Name, lines([]string{
		"CountDown" + l.Name + " counts " + l.Name + for_(l) + " down by one; the call that",
		"reaches zero releases every waiter. It never arms the latch.",
	}, cfg), nil, []jen.Code{jen.Error()}, build,
		func(h *jen.Statement) jen.Code { return jen.Return(h.Dot("CountDown").Call(ctx)) },
		jen.Return(jen.Err()))
	options := jen.Var().Id(optionsVarName(l)).Op("=").Qual(runtimePkg, "LatchOptions").Values(
		option("Name", jen.Lit(l.Name)),
		option("Count", jen.Lit(l.Count)),
		option("WaitTime", waitCode(l.WaitTime)),
		jen.Line(),
	)
	return joinDecls(handle, arm, await, countDown, options, keyFunc(l))
}

// latchWaitSentence says how long Await<Name> waits.
func latchWaitSentence(l *Lock) string {
	switch d := l.WaitTime; {
	case d < 0:
		return "It waits until ctx is done."
	case d == 0:
		return "It checks once (runtime.ErrNotAcquired if not released)."
	default:
		return "It waits up to " + d.String() + " (then runtime.ErrNotAcquired)."
	}
}
