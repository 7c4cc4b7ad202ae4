// Package errs holds the runtime's sentinel errors, so that its internal
// packages can return them. Package runtime re-exports each one, with its
// documentation (runtime.ErrNotAcquired is errs.NotAcquired): callers test
// with errors.Is against the runtime's names.
package errs
