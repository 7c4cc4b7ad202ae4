// want package:`order locks\.OrderLock>locks\.PaymentLock locks\.PaymentLock>locks\.OrderLock\}$`

// Package quiet links x and y too, and silences the cycle at the import.
package quiet

import (
	"context"

	"example.com/vettest/linked/x" //lockgen:ignore captures and refunds never overlap: refunds run after settlement
	"example.com/vettest/linked/y"
	"example.com/vettest/locks"
)

func Run(ctx context.Context, l *locks.Locks) { // want Run:`^acquires locks\.OrderLock, locks\.PaymentLock$`
	_ = x.Capture(ctx, l, 1, "p")
	_ = y.Refund(ctx, l, 1, "p")
}
