package locks

import "context"

// WithOrderLockRetry extends the generated Locks: that is fine.
func (l *Locks) WithOrderLockRetry(ctx context.Context, id int64, fn func(context.Context) error) error {
	return l.WithOrderLock(ctx, id, fn)
}

// WithOrderLock is one of the generated methods.
func (l *Locks) WithOrderLock(ctx context.Context, id int64, fn func(context.Context) error) error {
	return nil
}

// WithCatalogWrite too.
func (l Locks) WithCatalogWrite() {}

// c is the generated struct's field.
func (l *Locks) c() {}
