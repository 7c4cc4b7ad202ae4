package templates

import "strings"

// The docs of runtime.Value, the way to get a value back from a hold: a
// With<Name> helper's fn returns only an error, and Go methods cannot
// have type parameters, so the generated code has no generic helper; it
// points at runtime.Value with the Do of the helper's handle instead.

// handleExpr is the expression for the handle a With helper holds, e.g.
// l.OrderLock(orderID) or l.Catalog(shopID).Read(); on is "h" for a lock
// whose handle constructor can fail, which the caller builds first.
func handleExpr(l *Lock, on, side string) string {
	h := on
	if h == "" {
		h = "l." + l.Name + "(" + strings.Join(paramNames(l), ", ") + ")"
	}
	if side != "" {
		h += "." + side + "()"
	}
	return h
}

// valueDoc is the paragraph of a With helper's doc that shows how to get a
// value back from fn; side is "Read" or "Write" for a read-write lock.
func valueDoc(l *Lock, side string) []string {
	doc := []string{
		"",
		"To get a value back from fn, pass the handle's Do to runtime.Value:",
		"runtime.Value(ctx, " + handleExpr(l, "", side) + ".Do, fn), with fn returning (T, error).",
	}
	if l.fallible() {
		doc = []string{
			"",
			"To get a value back from fn, pass the Do of the handle h that",
			handleExpr(l, "", "") + " returns to runtime.Value: runtime.Value(ctx, " + handleExpr(l, "h", side) + ".Do, fn),",
			"with fn returning (T, error).",
		}
	}
	if l.Fenced {
		doc = append(doc, "That fn reads the fencing token with runtime.Fence(ctx).")
	}
	return doc
}

// valuePackageDoc is the package doc's paragraph on runtime.Value, with an
// example on the first lock that can show it plainly (one whose handle
// constructor cannot fail); nil when no lock is held with a function.
func valuePackageDoc(locks []Lock) []string {
	doc := []string{
		"",
		"A With<Name> helper's fn returns only an error. To get a value back from",
		"a hold, pass the Do of the lock's handle to runtime.Value, which holds",
		"the lock as With<Name> does and returns what fn returns.",
	}
	held := false
	for i := range locks {
		l := &locks[i]
		if l.Kind == "latch" {
			continue
		}
		held = true
		if l.fallible() {
			continue
		}
		side := ""
		if l.Kind == "readwrite" {
			side = "Read"
		}
		doc[len(doc)-1] = strings.TrimSuffix(doc[len(doc)-1], ".") + ":"
		return append(doc,
			"",
			"\tn, err := runtime.Value(ctx, "+handleExpr(l, "", side)+".Do, func(ctx context.Context) (int, error) {",
			"\t\treturn compute("+strings.Join(append([]string{"ctx"}, paramNames(l)...), ", ")+") // while holding the lock",
			"\t})",
		)
	}
	if !held {
		return nil
	}
	return doc
}

// paramNames are the names of the lock's params, in order.
func paramNames(l *Lock) []string {
	names := make([]string, len(l.Params))
	for i, p := range l.Params {
		names[i] = p.Name
	}
	return names
}
