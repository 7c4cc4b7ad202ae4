package templates

import (
	"github.com/dave/jennifer/jen"
)

// Multi emits a multi-lock: the handle constructor <Name> returning a
// *runtime.MultiLock over its members' handles (a read-write member's
// write side), With<Name> and its options. It has no key function: its
// keys are its members'.
func Multi(l *Lock) jen.Code {
	var names, writeSides []string
	for _, m := range l.Members {
		names = append(names, m.Name)
		if m.Kind == "readwrite" {
			writeSides = append(writeSides, m.Name)
		}
	}
	var about []string
	if l.Atomic {
		about = []string{
			"Every member is reentrant and in one cluster slot (atomic: true), so",
			"one script call takes them all.",
		}
	} else {
		about = []string{
			"The members are taken in key order, and those taken are released again",
			"if one cannot be had, so multi-locks that share members cannot deadlock.",
		}
	}
	switch len(writeSides) {
	case 0:
	case 1:
		about = append(about, writeSides[0]+" is held on its write side.")
	default:
		about = append(about, andList(writeSides)+" are held on their write sides.")
	}
	var cfg []string
	if l.Atomic {
		cfg = configLines(l, configLine("atomic", "true (reentrant members in one cluster slot: one script call)"))
	} else {
		cfg = configLines(l)
	}
	handle := multiHandle(l, lines([]string{
		l.Name + " returns the multi-lock " + l.Name + for_(l) + ":",
		andList(names) + ", held all or nothing. Its Lock, TryLock and",
		"Unlock take and release every member; Keys lists their keys.",
	}, about, docBlock(l), cfg))
	with := withFunc(l, "With"+l.Name, lines([]string{
		"With" + l.Name + " runs fn while holding every member of " + l.Name + for_(l) + ":",
		andList(names) + ".",
		waitSentence(l.WaitTime),
	}, about, []string{
		"fn gets the ctx of the hold: it is cancelled if any member is lost, and",
		"a nested call with that ctx re-enters the lock.",
	}, valueDoc(l, ""), cfg), func() *jen.Statement { return multiCall(l, memberHandles(l, nil)) }, wholeHandle)
	return joinDecls(handle, with, optionsVar(l))
}

// multiHandle emits the handle constructor of a multi lock. When a
// member's handle can fail to build, so can the multi lock's: it builds
// those members first and returns the first error.
func multiHandle(l *Lock, doc []string) jen.Code {
	sig := handleSig(l, doc)
	typ := jen.Op("*").Qual(runtimePkg, "MultiLock")
	if !l.fallible() {
		return sig.Add(typ).Block(jen.Return(multiCall(l, memberHandles(l, nil))))
	}
	taken := map[string]bool{"l": true, "err": true} // the body's other names
	for _, p := range l.Params {
		taken[p.Name] = true
	}
	vars := map[string]string{}
	var body []jen.Code
	for _, m := range l.Members {
		if !m.fallible() {
			continue
		}
		v := lowerFirst(m.Name)
		for taken[v] {
			v += "_"
		}
		taken[v] = true
		vars[m.Name] = v
		body = append(body,
			jen.List(jen.Id(v), jen.Err()).Op(":=").Add(memberCall(&m)),
			jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Nil(), jen.Err())),
		)
	}
	body = append(body, jen.Return(multiCall(l, memberHandles(l, vars)), jen.Nil()))
	return sig.Params(typ, jen.Error()).Block(body...)
}

// multiCall is l.c.MultiLock(<options>, members...), one member a line.
func multiCall(l *Lock, members []jen.Code) *jen.Statement {
	args := []jen.Code{jen.Id(optionsVarName(l))}
	for _, m := range members {
		args = append(args, jen.Line().Add(m))
	}
	return jen.Id("l").Dot("c").Dot("MultiLock").Call(append(args, jen.Line())...)
}

// memberHandles are the *runtime.Mutex handles of the members: the
// member's handle constructor, or the variable in vars that holds its
// result, and the write side of a read-write member.
func memberHandles(l *Lock, vars map[string]string) []jen.Code {
	out := make([]jen.Code, len(l.Members))
	for i := range l.Members {
		m := &l.Members[i]
		h := memberCall(m)
		if v, ok := vars[m.Name]; ok {
			h = jen.Id(v)
		}
		if m.Kind == "readwrite" {
			h = h.Dot("Write").Call()
		}
		out[i] = h
	}
	return out
}

// memberCall calls the member's handle constructor with its params.
func memberCall(m *Lock) *jen.Statement {
	return jen.Id("l").Dot(m.Name).Call(argList(m)...)
}
