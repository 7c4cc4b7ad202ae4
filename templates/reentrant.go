package templates

import "github.com/dave/jennifer/jen"

// Reentrant emits a reentrant lock: the handle constructor <Name>
// returning a *runtime.Mutex, With<Name>, its options and its key function.
// A fenced one is emitted by Fenced.
func Reentrant(l *Lock) jen.Code {
	if l.Fenced {
		return Fenced(l)
	}
	return exclusive{kind: "reentrant lock", ctor: "Mutex"}.emit(l)
}

// exclusive is a kind held as a whole through one handle: reentrant and
// fair (a *runtime.Mutex), and red (a *runtime.RedLock).
type exclusive struct {
	kind    string     // in the docs: "reentrant lock", "fair lock"
	ctor    string     // the runtime.Client method that returns the handle
	handle  string     // the handle's runtime type; "" for Mutex
	methods string     // the handle's methods, for the docs; "" for a Mutex's
	about   []string   // doc lines on how the kind grants the lock
	config  []string   // the kind's own lines of the config block (configLine)
	options []jen.Code // LockOptions fields beyond name, lease and wait time
}

func (k exclusive) emit(l *Lock) jen.Code {
	handle, methods := k.handle, k.methods
	if handle == "" {
		handle = "Mutex"
		methods = "Lock, TryLock and Unlock, and IsLocked, HoldCount, RemainTTL and ForceUnlock"
	}
	cfg := configLines(l, k.config...)
	ctor := clientCtor(l, k.ctor)
	handleDecl := handleFunc(l, lines([]string{
		l.Name + " returns the handle of the " + k.kind + " " + l.Name + for_(l) + ",",
		"for " + methods + ".",
	}, k.about, docBlock(l), cfg), jen.Op("*").Qual(runtimePkg, handle), ctor)
	with := withFunc(l, "With"+l.Name, lines([]string{
		"With" + l.Name + " runs fn while holding " + l.Name + for_(l) + ".",
		waitSentence(l.WaitTime),
	}, k.about, []string{
		"fn gets the ctx of the hold: it is cancelled if the lock is lost, and a",
		"nested call with that ctx re-enters the lock.",
	}, valueDoc(l, ""), cfg), keyed(l, ctor), wholeHandle)
	return lockDecls(l, k.options, handleDecl, with)
}
