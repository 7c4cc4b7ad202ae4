package runtime

import "github.com/lockgen/lockgen/runtime/internal/holds"

// The holds of a Client live in its registry (package holds). These are
// the names the handles of the other kinds use for it.
type (
	hold        = holds.Hold
	holdID      = holds.ID
	lockArgs    = holds.Args
	acquisition = holds.Acquisition
)
