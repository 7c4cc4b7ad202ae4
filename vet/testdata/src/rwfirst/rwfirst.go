// Package rwfirst nests read holds of a writers-first readwrite lock
// (fairness: {writers: first}): a writer queued on a shelf holds back new
// readers of it, so a read inside a read of it can wait for ever.
package rwfirst

import (
	"context"

	"example.com/vettest/locks"
)

// Compare reads shelf b inside a read of shelf a; Compare(b, a) runs too.
// Writers queued on a and on b each wait for one Compare's read and hold
// back the other's.
func Compare(ctx context.Context, l *locks.Locks, a, b int64) error { // want Compare:`^acquires locks\.Shelf$`
	return l.WithShelfRead(ctx, a, func(hctx context.Context) error {
		return l.WithShelfRead(hctx, b, func(context.Context) error { return nil }) // want `^nested instances of one lock: locks.Shelf\(b\) is taken while locks.Shelf\(a\) is held`
	})
}

// Again reads shelf a again with the outer ctx: a new reader, which queues
// behind a waiting writer, which waits for this goroutine's own read.
func Again(ctx context.Context, l *locks.Locks, a int64) error { // want Again:`^acquires locks\.Shelf$`
	return l.WithShelfRead(ctx, a, func(hctx context.Context) error {
		return l.WithShelfRead(ctx, a, func(context.Context) error { return nil }) // want `^self-deadlock: locks.Shelf is taken again with ctx`
	})
}

// Handle reads through the handle's Read side: the same.
func Handle(ctx context.Context, l *locks.Locks, a, b int64) error { // want Handle:`^acquires locks\.Shelf$`
	return l.Shelf(a).Read().Do(ctx, func(hctx context.Context) error {
		return l.Shelf(b).Read().Do(hctx, func(context.Context) error { return nil }) // want `^nested instances of one lock: locks.Shelf\(b\) is taken while locks.Shelf\(a\) is held`
	})
}
