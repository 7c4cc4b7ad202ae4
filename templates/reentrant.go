package templates

import "github.com/dave/jennifer/jen"

// Reentrant emits a reentrant lock: the handle constructor <Name>
// returning a *runtime.Mutex, With<Name>, its options and its key function.
func Reentrant(l *Lock) jen.Code {
	return exclusive{kind: "reentrant lock", ctor: "Mutex"}.emit(l)
}

// exclusive is a kind whose handle is one *runtime.Mutex: reentrant and fair.
type exclusive struct {
	kind     string     // in the docs: "reentrant lock", "fair lock"
	ctor     string     // the runtime.Client method that returns the Mutex
	about    []string   // doc lines on how the kind grants the lock
	fairness string     // the fairness line of the config block; "" for none
	options  []jen.Code // LockOptions fields beyond name, lease and wait time
}

func (k exclusive) emit(l *Lock) jen.Code {
	cfg := configLines(l, k.fairness)
	ctor := clientCtor(l, k.ctor)
	handle := handleFunc(l, lines([]string{
		l.Name + " returns the handle of the " + k.kind + " " + l.Name + for_(l) + ",",
		"for Lock, TryLock and Unlock, and IsLocked, HoldCount, RemainTTL and ForceUnlock.",
	}, k.about, docBlock(l), cfg), jen.Op("*").Qual(runtimePkg, "Mutex"), ctor)
	with := withFunc(l, "With"+l.Name, lines([]string{
		"With" + l.Name + " runs fn while holding " + l.Name + for_(l) + ".",
		waitSentence(l.WaitTime),
	}, k.about, []string{
		"fn gets the ctx of the hold: it is cancelled if the lock is lost, and a",
		"nested call with that ctx re-enters the lock.",
	}, cfg), ctor, wholeHandle)
	return lockDecls(l, k.options, handle, with)
}
