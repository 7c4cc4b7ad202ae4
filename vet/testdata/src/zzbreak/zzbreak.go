// Package zzbreak: escape-check cases around the new "carried" stores.
package zzbreak

import (
	"context"

	"example.com/vettest/locks"
)

type S struct {
	l    *locks.Locks
	jobs chan func()
	reqs []request
}

type request struct {
	ctx context.Context
	id  int64
}

type retryOpts struct {
	onRetry func()
}

func run(o retryOpts) error { o.onRetry(); return nil }

func use(ctx context.Context, item string) error { return ctx.Err() }

func audit(ctx context.Context) { _ = ctx.Err() }

// LocalSteps builds closures over hctx in a slice local to fn and runs
// them all before fn returns: nothing escapes.
func (s *S) LocalSteps(ctx context.Context, id int64, items []string) error { // want LocalSteps:`^acquires locks\.OrderLock$`
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
		return nil
	})
}

// LocalOptions sets a callback over hctx on an options value local to
// fn, used before fn returns: nothing escapes.
func (s *S) LocalOptions(ctx context.Context, id int64) error { // want LocalOptions:`^acquires locks\.OrderLock$`
	return s.l.WithOrderLock(ctx, id, func(hctx context.Context) error {
		var o retryOpts
		o.onRetry = func() { audit(hctx) }
		return run(o)
	})
}

// SentClosure hands a closure over hctx to a worker: it runs after the
// hold ends (like s.pending = func() { audit(hctx) }, which is reported).
func (s *S) SentClosure(ctx context.Context, id int64) error { // want SentClosure:`^acquires locks\.OrderLock$`
	return s.l.WithOrderLock(ctx, id, func(hctx context.Context) error {
		s.jobs <- func() { audit(hctx) } // want `escapes`
		return nil
	})
}

// BuiltThenStored builds the request first, then stores it in a field.
func (s *S) BuiltThenStored(ctx context.Context, id int64) error { // want BuiltThenStored:`^acquires locks\.OrderLock$`
	return s.l.WithOrderLock(ctx, id, func(hctx context.Context) error {
		req := request{ctx: hctx, id: id}
		s.reqs = append(s.reqs, req) // want `stored in the field s.reqs`
		return nil
	})
}
