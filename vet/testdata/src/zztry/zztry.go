// Package zztry: With<Name> of a lock declared waitTime: 0 tries once,
// like TryLock(ctx, 0, …): it cannot close a deadlock cycle either.
package zztry

import (
	"context"

	"example.com/vettest/zztry/tlocks"
)

type S struct{ l *tlocks.Locks }

// One takes ATry (waitTime 0) under BTry (waitTime 0)...
func (s *S) One(ctx context.Context, id int64) error { // want One:`^acquires tlocks\.ATry, tlocks\.BTry$`
	return s.l.WithBTry(ctx, id, func(hctx context.Context) error {
		return s.l.WithATry(hctx, id, func(context.Context) error { return nil })
	})
}

// ... and Two the other way: both only try, so neither waits.
func (s *S) Two(ctx context.Context, id int64) error { // want Two:`^acquires tlocks\.ATry, tlocks\.BTry$`
	return s.l.WithATry(ctx, id, func(hctx context.Context) error {
		return s.l.WithBTry(hctx, id, func(context.Context) error { return nil })
	})
}
