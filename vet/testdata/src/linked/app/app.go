// want package:`order locks\.OrderLock>locks\.PaymentLock locks\.PaymentLock>locks\.OrderLock\}$`

// Package app links x and y: the first package that sees both sides.
package app

import (
	"context"

	"example.com/vettest/linked/x" // want `^lock-order inversion in imported packages that this package links: locks.PaymentLock is taken while locks.OrderLock is held, and elsewhere the other way round \(take both in one multi lock, or in one order everywhere\)$`
	"example.com/vettest/linked/y"
	"example.com/vettest/locks"
)

func Run(ctx context.Context, l *locks.Locks) {
	go x.Capture(ctx, l, 1, "p")
	go y.Refund(ctx, l, 1, "p")
}
