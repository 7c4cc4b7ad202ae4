package lockgen

import "slices"

// KeyPattern is the key as the generated code renders it: Key with the
// slot, when set, applied as a hash tag. Tools that read a lock's keys in
// Redis (lockgen inspect) derive them from it.
func (l *Lock) KeyPattern() Pattern { return l.key() }

// Leaves are the locks a multi lock takes, nested multi locks flattened,
// each lock once, in member order; nil for the other kinds.
func (l *Lock) Leaves() []*Lock { return slices.Clone(l.leaves) }
