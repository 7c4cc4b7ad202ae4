// want package:`order locks\.OrderLock>locks\.PaymentLock locks\.PaymentLock>locks\.OrderLock\}$`

// Package app links x and y: the first package that sees both sides.
package app

import (
	"context"

	"example.com/vettest/linked/x" // want `lock-order inversion: locks.PaymentLock is taken while locks.OrderLock is held \(taken at .*x.go:11:9\), and locks.OrderLock is taken while locks.PaymentLock is held at .*y.go:12:10.*this package links them`
	"example.com/vettest/linked/y"
	"example.com/vettest/locks"
)

func Run(ctx context.Context, l *locks.Locks) {
	go x.Capture(ctx, l, 1, "p")
	go y.Refund(ctx, l, 1, "p")
}
