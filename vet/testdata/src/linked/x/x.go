// Package x takes OrderLock, then PaymentLock.
package x

import (
	"context"

	"example.com/vettest/locks"
)

func Capture(ctx context.Context, l *locks.Locks, id int64, pay string) error {
	return l.WithOrderLock(ctx, id, func(ctx context.Context) error {
		return l.WithPaymentLock(ctx, pay, func(ctx context.Context) error { return nil })
	})
}
