package runtime_test

import "github.com/lockgen/lockgen/runtime"

// A fenced lock joins the fault matrix of the deadline invariant
// (overlap_test.go): its acquire script differs from a plain lock's (the
// token INCR), its holds and deadlines must not.
func init() {
	f := func(c *runtime.Client, key string) overlapLocker {
		return c.FencedLock(key, runtime.LockOptions{})
	}
	overlapKinds = append(overlapKinds, overlapKind{"fenced", f, f})
}
