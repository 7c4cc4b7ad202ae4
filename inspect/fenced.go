package inspect

import "github.com/lockgen/lockgen"

// fenced reports whether l hands out fencing tokens (fenced: true).
func fenced(l *lockgen.Lock) bool { return l.Fenced }
