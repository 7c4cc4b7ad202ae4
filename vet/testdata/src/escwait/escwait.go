// Package escwait starts goroutines with the hold's ctx inside a critical
// section: fn waits for them when it calls Wait after the go statement or
// defers it; a Wait that runs in another goroutine does not hold fn back.
package escwait

import (
	"context"
	"sync"

	"example.com/vettest/locks"
)

// Deferred waits with the usual defer wg.Wait(): no escape.
func Deferred(ctx context.Context, l *locks.Locks, id int64, parts []string) error { // want Deferred:`^acquires locks\.OrderLock$`
	return l.WithOrderLock(ctx, id, func(hctx context.Context) error {
		var wg sync.WaitGroup
		defer wg.Wait()
		for _, p := range parts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				use(hctx, p)
			}()
		}
		return nil
	})
}

// Elsewhere leaves the waiting to another goroutine and returns at once:
// the workers keep hctx after the lock is released.
func Elsewhere(ctx context.Context, l *locks.Locks, id int64, parts []string, out chan<- string) error { // want Elsewhere:`^acquires locks\.OrderLock$`
	return l.WithOrderLock(ctx, id, func(hctx context.Context) error {
		var wg sync.WaitGroup
		for _, p := range parts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				use(hctx, p) // want `^hctx, the hold's ctx, escapes its critical section into a goroutine`
			}()
		}
		go func() { wg.Wait(); close(out) }()
		return nil
	})
}

// DeferredLit defers a func literal that waits: no escape.
func DeferredLit(ctx context.Context, l *locks.Locks, id int64) error { // want DeferredLit:`^acquires locks\.OrderLock$`
	return l.WithOrderLock(ctx, id, func(hctx context.Context) error {
		var wg sync.WaitGroup
		defer func() {
			wg.Wait()
		}()
		wg.Add(1)
		go func() {
			defer wg.Done()
			use(hctx, "x")
		}()
		return nil
	})
}

func use(context.Context, string) {}
