package locks

import "time"

// Locks is a hand-written type that happens to use lockgen's name.
type Locks struct{}

// New is hand-written too.
func New() *Locks { return &Locks{} }

func orderLockKey(id int64) string { return "" }

var sKULockOptions = time.Second

var strconv = "not the package"
