package templates

import (
	"strings"

	"github.com/dave/jennifer/jen"
)

// ReadWrite emits a read-write lock: the handle constructor <Name>
// returning a *runtime.RWLock (its Read and Write sides are Mutex
// handles), With<Name>Read and With<Name>Write, its options, with
// WritersFirst, and its key function.
func ReadWrite(l *Lock) jen.Code {
	cfg := configLines(l, configLine("fairness", writersText(l.WritersFirst)))
	ctor := clientCtor(l, "ReadWrite")
	handle := handleFunc(l, lines([]string{
		l.Name + " returns the read-write lock " + l.Name + for_(l) + ": many readers or one writer.",
		"Its Read and Write sides are handles for Lock, TryLock and Unlock, and",
		"IsLocked, HoldCount, RemainTTL and ForceUnlock.",
	}, docBlock(l), cfg), jen.Op("*").Qual(runtimePkg, "RWLock"), ctor)
	with := func(name, sharing string, nested ...string) jen.Code {
		return withFunc(l, "With"+l.Name+name, lines([]string{
			"With" + l.Name + name + " runs fn while holding the " + strings.ToLower(name) + " side of " + l.Name + for_(l) + ":",
			sharing,
			waitSentence(l.WaitTime),
			"fn gets the ctx of the hold: it is cancelled if the lock is lost, and a",
		}, nested, valueDoc(l, name), cfg), keyed(l, ctor), side(name))
	}
	read := with("Read", "other readers may hold it at the same time, a writer may not.",
		"nested read with that ctx re-enters the lock; a nested write fails with",
		"runtime.ErrUpgrade (a reader waiting to write would wait for itself).")
	write := with("Write", "no reader and no other writer holds it meanwhile.",
		"nested call with that ctx re-enters the lock; it may also read (downgrade).")
	return lockDecls(l, []jen.Code{option("WritersFirst", jen.Lit(l.WritersFirst))}, handle, read, write)
}

// side picks the Read or Write side of an RWLock handle.
func side(name string) func(*jen.Statement) *jen.Statement {
	return func(handle *jen.Statement) *jen.Statement { return handle.Dot(name).Call() }
}

// writersText is the fairness line of a read-write lock's config block.
func writersText(first bool) string {
	if first {
		return "writers first (a waiting writer holds back new readers)"
	}
	return "writers redisson (readers join a read-held lock even while a writer waits)"
}
