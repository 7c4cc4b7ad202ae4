// want package:`order locks\.OrderLock>locks\.InventoryLock locks\.OrderLock>locks\.InventoryLock locks\.OrderLock>locks\.InventoryLock locks\.OrderLock>locks\.InventoryLock\}$`

// Package ctxuse passes the wrong ctx to locks taken inside a critical
// section, and lets a hold's ctx escape it.
package ctxuse

import (
	"context"
	"time"

	"example.com/vettest/locks"
)

type Service struct {
	l    *locks.Locks
	last context.Context
}

var current context.Context

// OuterCtx takes InventoryLock with the ctx from outside OrderLock's critical section.
func (s *Service) OuterCtx(ctx context.Context, id int64, sku string) error { // want OuterCtx:`^acquires locks\.InventoryLock, locks\.OrderLock$`
	return s.l.WithOrderLock(ctx, id, func(hctx context.Context) error {
		return s.l.WithInventoryLock(ctx, sku, func(context.Context) error { return nil }) // want `^locks.InventoryLock is taken with ctx inside the critical section of locks.OrderLock: pass hctx, the hold's ctx$`
	})
}

// Background takes a lock inside a critical section with a fresh ctx.
func (s *Service) Background(ctx context.Context, id int64, sku string) error { // want Background:`^acquires locks\.InventoryLock, locks\.OrderLock$`
	return s.l.WithOrderLock(ctx, id, func(hctx context.Context) error {
		return s.l.WithInventoryLock(context.Background(), sku, func(context.Context) error { return nil }) // want `^locks.InventoryLock is taken with context.Background\(\) inside the critical section of locks.OrderLock: pass hctx`
	})
}

// SelfDeadlock takes the lock it holds again with the outer ctx: it waits for itself.
func (s *Service) SelfDeadlock(ctx context.Context, id int64) error { // want SelfDeadlock:`^acquires locks\.OrderLock$`
	return s.l.WithOrderLock(ctx, id, func(hctx context.Context) error {
		return s.l.WithOrderLock(ctx, id, func(context.Context) error { return nil }) // want `^self-deadlock: locks.OrderLock is taken again with ctx while this goroutine holds it: pass hctx, the hold's ctx$`
	})
}

// SelfDeadlockThroughHandle does the same with the handle and a derived outer ctx.
func (s *Service) SelfDeadlockThroughHandle(ctx context.Context, id int64) error { // want SelfDeadlockThroughHandle:`^acquires locks\.OrderLock$`
	return s.l.WithOrderLock(ctx, id, func(hctx context.Context) error {
		tctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		m := s.l.OrderLock(id)
		held, err := m.Lock(tctx) // want `self-deadlock: locks.OrderLock is taken again with ctx`
		if err != nil {
			return err
		}
		return m.Unlock(held)
	})
}

// Reentry takes the held lock again with the hold's ctx, derived: it re-enters.
func (s *Service) Reentry(ctx context.Context, id int64, sku string) error { // want Reentry:`^acquires locks\.InventoryLock, locks\.OrderLock$`
	return s.l.WithOrderLock(ctx, id, func(hctx context.Context) error {
		tctx, cancel := context.WithTimeout(hctx, time.Second)
		defer cancel()
		if err := s.l.WithOrderLock(tctx, id, func(context.Context) error { return nil }); err != nil {
			return err
		}
		return s.l.WithInventoryLock(hctx, sku, func(context.Context) error { return nil })
	})
}

// OtherKey takes the same lock for another order with the outer ctx:
// not a self-deadlock, still the wrong ctx.
func (s *Service) OtherKey(ctx context.Context, id int64) error { // want OtherKey:`^acquires locks\.OrderLock$`
	return s.l.WithOrderLock(ctx, id, func(hctx context.Context) error {
		return s.l.WithOrderLock(ctx, id+1, func(context.Context) error { return nil }) // want `^locks.OrderLock is taken with ctx inside the critical section of locks.OrderLock` `^nested instances of one lock: locks.OrderLock\(id \+ 1\) is taken while locks.OrderLock\(id\) is held`
	})
}

// Escapes lets the hold's ctx out of its critical section three ways.
func (s *Service) Escapes(ctx context.Context, id int64, done chan<- context.Context) error { // want Escapes:`^acquires locks\.OrderLock$`
	return s.l.WithOrderLock(ctx, id, func(hctx context.Context) error {
		go s.audit(hctx) // want `^hctx, the hold's ctx, escapes its critical section into a goroutine`
		s.last = hctx    // want `^hctx, the hold's ctx, escapes its critical section: stored in the field s.last \(keep it inside fn\)$`
		current = hctx   // want `stored in the global current`
		done <- hctx     // want `sent on a channel`
		go func() {
			<-hctx.Done() // want `^hctx, the hold's ctx, escapes its critical section into a goroutine`
		}()
		go s.audit(ctx) // the caller's ctx may outlive the hold
		return nil
	})
}

func (s *Service) audit(ctx context.Context) { <-ctx.Done() }

// NestedReentry re-enters the outer lock with the outer hold's own ctx
// from inside an inner critical section: it re-enters; only the inner
// lock's loss would not cancel it, which is not reported.
func (s *Service) NestedReentry(ctx context.Context, id int64, sku string) error { // want NestedReentry:`^acquires locks\.InventoryLock, locks\.OrderLock$`
	return s.l.WithOrderLock(ctx, id, func(octx context.Context) error {
		return s.l.WithInventoryLock(octx, sku, func(ictx context.Context) error {
			return s.l.WithOrderLock(octx, id, func(context.Context) error { return ictx.Err() })
		})
	})
}

// Store keeps what it is given past the call.
type Store struct {
	l       *locks.Locks
	ctxs    []context.Context
	req     *request
	reqs    []request
	pending func()
	n       int
}

type request struct {
	ctx context.Context
	id  int64
}

// EscapesInside stores the hold's ctx inside what it stores: appended to
// a slice, in a struct literal, captured by a closure.
func (s *Store) EscapesInside(ctx context.Context, id int64) error { // want EscapesInside:`^acquires locks\.OrderLock$`
	return s.l.WithOrderLock(ctx, id, func(hctx context.Context) error {
		s.ctxs = append(s.ctxs, hctx)              // want `^hctx, the hold's ctx, escapes its critical section: stored in the field s.ctxs \(keep it inside fn\)$`
		s.req = &request{ctx: hctx, id: id}        // want `stored in the field s.req`
		s.reqs = append(s.reqs, request{hctx, id}) // want `stored in the field s.reqs`
		s.pending = func() { audit(hctx) }         // want `stored in the field s.pending`
		s.ctxs = append(s.ctxs, ctx)               // the caller's ctx may outlive the hold
		s.n = count(hctx)                          // a value computed with it, not it
		s.pending = func() { audit(context.TODO()) }
		s.req = &request{ctx: context.Background(), id: id}
		return nil
	})
}

func audit(ctx context.Context) { <-ctx.Done() }

func count(context.Context) int { return 1 }

type retryOpts struct{ onRetry func() }

func run(o retryOpts) error { o.onRetry(); return nil }

func use(ctx context.Context, item string) error { return ctx.Err() }

// StoresInsideFn keeps the hold's ctx in containers declared inside fn
// (a slice of steps, an options value, a map), all used before fn
// returns: nothing outlives the hold, nothing is reported.
func (s *Store) StoresInsideFn(ctx context.Context, id int64, items []string) error { // want StoresInsideFn:`^acquires locks\.OrderLock$`
	return s.l.WithOrderLock(ctx, id, func(hctx context.Context) error {
		steps := make([]func() error, len(items))
		for i := range items {
			steps[i] = func() error { return use(hctx, items[i]) }
		}
		for _, st := range steps {
			if err := st(); err != nil {
				return err
			}
		}
		var o retryOpts
		o.onRetry = func() { audit(hctx) }
		m := map[string]context.Context{}
		m["a"] = hctx
		var r request
		r.ctx = hctx
		_ = use(m["a"], "")
		return run(o)
	})
}

// StoresOutsideFn keeps it in a field of a parameter, a map declared
// before the hold and an element of a global: each outlives fn.
func (s *Store) StoresOutsideFn(ctx context.Context, id int64, r *request) error { // want StoresOutsideFn:`^acquires locks\.OrderLock$`
	m := map[string]context.Context{}
	err := s.l.WithOrderLock(ctx, id, func(hctx context.Context) error {
		r.ctx = hctx       // want `stored in the field r.ctx`
		m["a"] = hctx      // want `stored in m\["a"\]`
		byName["a"] = hctx // want `stored in byName\["a"\]`
		(*r).ctx = hctx    // want `stored in the field \(\*r\).ctx`
		return nil
	})
	_ = m
	return err
}

var byName = map[string]context.Context{}

// Worker hands work on to other goroutines.
type Worker struct {
	l    *locks.Locks
	jobs chan func()
	reqs []request
}

// EscapesLater hands the hold's ctx on in a closure sent to a worker, and
// in a request built first and stored after: both outlive the hold.
func (w *Worker) EscapesLater(ctx context.Context, id int64) error { // want EscapesLater:`^acquires locks\.OrderLock$`
	return w.l.WithOrderLock(ctx, id, func(hctx context.Context) error {
		w.jobs <- func() { audit(hctx) } // want `^hctx, the hold's ctx, escapes its critical section: sent on a channel`
		req := request{ctx: hctx, id: id}
		w.reqs = append(w.reqs, req) // want `stored in the field w.reqs`
		job := func() { audit(hctx) }
		w.jobs <- job // want `sent on a channel`
		return nil
	})
}
