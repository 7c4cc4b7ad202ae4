// Package y takes PaymentLock, then OrderLock; it does not know package x.
package y

import (
	"context"

	"example.com/vettest/locks"
)

func Refund(ctx context.Context, l *locks.Locks, id int64, pay string) error {
	return l.WithPaymentLock(ctx, pay, func(ctx context.Context) error {
		return l.WithOrderLock(ctx, id, func(ctx context.Context) error { return nil })
	})
}
