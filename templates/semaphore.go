package templates

import (
	"strconv"
	"time"

	"github.com/dave/jennifer/jen"
)

// Semaphore emits a semaphore: the handle constructor <Name> returning a
// *runtime.Semaphore, With<Name> (one permit), its options (a
// runtime.SemaphoreOptions with the permits) and its key function.
func Semaphore(l *Lock) jen.Code {
	cfg := configLines(l, configLine("permits", strconv.Itoa(l.Permits)+" (what a fresh semaphore starts with)"))
	ctor := clientCtor(l, "Semaphore")
	about := []string{
		"At most " + strconv.Itoa(l.Permits) + " holders at once; each permit has its own lease, so a holder",
		"that crashes gives its permit back when the lease ends.",
	}
	handle := handleFunc(l, lines([]string{
		l.Name + " returns the handle of the semaphore " + l.Name + for_(l) + ",",
		"for Acquire, TryAcquire and Release, and Available, TrySetPermits,",
		"SetPermits, AddPermits and Drain.",
	}, []string{""}, about, docBlock(l), cfg), jen.Op("*").Qual(runtimePkg, "Semaphore"), ctor)
	with := withFunc(l, "With"+l.Name, lines([]string{
		"With" + l.Name + " runs fn while holding one permit of " + l.Name + for_(l) + ".",
		permitWaitSentence(l.WaitTime),
	}, about, []string{
		"fn gets the ctx of the hold: it is cancelled if the permit is lost.",
		"Permits are not reentrant: a nested call takes another permit.",
	}, valueDoc(l, ""), cfg), keyed(l, ctor), wholeHandle)
	options := jen.Var().Id(optionsVarName(l)).Op("=").Qual(runtimePkg, "SemaphoreOptions").Values(
		option("Name", jen.Lit(l.Name)),
		option("Permits", jen.Lit(l.Permits)),
		option("Lease", leaseCode(l.Lease)),
		option("WaitTime", waitCode(l.WaitTime)),
		jen.Line(),
	)
	return joinDecls(handle, with, options, keyFunc(l))
}

// permitWaitSentence says how a semaphore's With<Name> call waits.
func permitWaitSentence(d time.Duration) string {
	switch {
	case d < 0:
		return "It waits for a permit until ctx is done, and gives it back when fn returns."
	case d == 0:
		return "It tries once (runtime.ErrNotAcquired if none is free), and gives the permit back when fn returns."
	}
	return "It waits up to " + d.String() + " for a permit, and gives it back when fn returns."
}
