// Package ledger posts to one account's ledger under its lock; package
// nested calls it inside holds of its own.
package ledger

import (
	"context"

	"example.com/vettest/locks"
)

// Post takes OrderLock for the order it is given.
func Post(ctx context.Context, l *locks.Locks, order int64) error { // want Post:`^acquires locks\.OrderLock$`
	return l.WithOrderLock(ctx, order, func(context.Context) error { return nil })
}
