package runtime

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/lockgen/lockgen/runtime/internal/errs"
	"github.com/lockgen/lockgen/runtime/internal/lockenv"
)

// Sentinel errors. Every error the runtime returns for a lock is a
// *LockError that wraps one of these (or a context or Redis error), so
// callers test with errors.Is and read the lock name and key from the
// *LockError with errors.As.
var (
	// ErrNotAcquired: the lock was held by someone else for the whole wait time.
	ErrNotAcquired = errs.NotAcquired
	// ErrLockLost: a hold ended without being released: its key was deleted
	// or expired, or the lease ran out before a renewal was confirmed. The
	// ctx of the hold is cancelled with a cause that wraps ErrLockLost, and
	// an acquisition waiting under that ctx (a nested lock, the next member
	// of a multi-lock) returns an error that wraps both ctx's error and it.
	ErrLockLost = errs.LockLost
	// ErrNotHeld: the ctx given to Unlock holds no acquisition of this lock
	// (never acquired, already released, or a hold of its key through
	// another kind of lock). Redisson's IllegalMonitorStateException.
	ErrNotHeld = errs.NotHeld
	// ErrClosed: the Client was closed.
	ErrClosed = errs.Closed
	// ErrUnavailable: Redis could not be reached, or refused the call
	// before running it for a state that passes (a slot being migrated:
	// TRYAGAIN; a failover: READONLY, LOADING, CLUSTERDOWN...), within the
	// wait time (or, for a single try, the Client's ReleaseTimeout); it
	// wraps the last transport error or refusal.
	// ErrNotAcquired, by contrast, means Redis answered that someone held
	// the lock.
	ErrUnavailable = errs.Unavailable
	// ErrDraining: the Client's Shutdown began; it takes no new locks.
	ErrDraining = errs.Draining
	// ErrInvalidKey: a lock key is empty, or a key parameter cannot be rendered safely.
	ErrInvalidKey = errs.InvalidKey
	// ErrInvalidLease: a lease is negative or too short to be useful.
	ErrInvalidLease = errs.InvalidLease
	// ErrInvalidArgument: some other argument is unusable, such as a nil fn.
	ErrInvalidArgument = errs.InvalidArgument
	// ErrUpgrade: a reader asked for the write side of a read-write lock
	// it holds for reading. Waiting would deadlock on itself; release the
	// read hold first.
	ErrUpgrade = errs.Upgrade
	// ErrQuorum: fewer RedLock nodes than the quorum could be reached.
	ErrQuorum = errs.Quorum
	// ErrNotReplicated: an acquisition was not acknowledged by
	// LockOptions.SyncReplicas replicas in time, and was undone.
	ErrNotReplicated = errs.NotReplicated
	// ErrOutcomeUnknown: an acquire or release got no reply and Redis could
	// not be reached to settle it. An unconfirmed acquisition is never
	// renewed, so it expires with its lease.
	ErrOutcomeUnknown = errs.OutcomeUnknown
)

// LockError describes a failed lock operation.
type LockError struct {
	Op   string // "acquire", "release", "renew", "lease", "force-unlock", "inspect"
	Name string // logical lock name from LockOptions.Name; may be empty
	Key  string // Redis key of the lock
	Err  error  // the cause; a sentinel above, a context error, or a Redis error
}

// Error reads "lockgen: Name (key): op: cause". The prefix appears once
// per chain: where the cause wraps a *LockError of the same lock (a
// release that reports the loss found by a renewal), the inner error's
// prefix is left out, giving "lockgen: Name (key): release: renew: lock
// lost" rather than the name and key twice.
func (e *LockError) Error() string {
	prefix := e.prefix()
	var b strings.Builder
	b.WriteString(prefix)
	b.WriteString(e.Op)
	b.WriteString(": ")
	if e.Err != nil {
		msg := e.Err.Error()
		if wrapsLockError(e.Err, e.Name, e.Key) {
			msg = strings.ReplaceAll(msg, prefix, "")
		}
		b.WriteString(msg)
	}
	return b.String()
}

// prefix is "lockgen: Name (key): ", or "lockgen: key: " without a name.
func (e *LockError) prefix() string {
	if e.Name != "" {
		return "lockgen: " + e.Name + " (" + e.Key + "): "
	}
	return "lockgen: " + e.Key + ": "
}

// wrapsLockError reports whether err is or wraps (through Unwrap, or a
// join) a *LockError for the lock with that name and key.
func wrapsLockError(err error, name, key string) bool {
	if le, ok := err.(*LockError); ok && le.Name == name && le.Key == key {
		return true
	}
	switch u := err.(type) {
	case interface{ Unwrap() []error }:
		return slices.ContainsFunc(u.Unwrap(), func(inner error) bool { return wrapsLockError(inner, name, key) })
	case interface{ Unwrap() error }:
		return wrapsLockError(u.Unwrap(), name, key)
	}
	return false
}

func (e *LockError) Unwrap() error { return e.Err }

// fail makes the *LockError of a failed op on the lock (name, key):
// what the engine's errors are (lockenv.Env.Fail).
// errNotMade is the error of a call on a handle no Client made: a nil
// pointer, or the zero value of a handle (or of a Client, whose methods
// return it too). Every handle has a made method, and every exported
// method checks it first: one that returns an error returns notMade's,
// the others (Key, Name, ID, a Client's constructors...) their zero
// values. None panics.
var errNotMade = fmt.Errorf("%w: a handle not made by a Client (make it with Client.Mutex, Client.RedLock and the like)", ErrInvalidArgument)

// notMade is the error of op on a handle no Client made.
func notMade(op string) error { return fail(op, "", "", errNotMade) }

// A handle is what guard needs of a lock handle.
type handle interface {
	made() bool
	Key() string
	fail(op string, err error) error
}

// guard refuses op on h with ctx: h not made by a Client (errNotMade), a
// nil ctx or a key no lock can have (usable).
func guard(h handle, ctx context.Context, op string) error {
	if !h.made() {
		return notMade(op)
	}
	if err := usable(ctx, h.Key()); err != nil {
		return h.fail(op, err)
	}
	return nil
}

// usable refuses a call on key with ctx that cannot work: a nil ctx, or
// a key no lock can have (lockenv.Validate).
func usable(ctx context.Context, key string) error {
	if err := checkCtx(ctx); err != nil {
		return err
	}
	return lockenv.Validate(key, Watchdog)
}

// checkCtx refuses a nil ctx.
func checkCtx(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil ctx (use context.Background() or context.TODO())", ErrInvalidArgument)
	}
	return nil
}

func fail(op, name, key string, err error) error {
	return &LockError{Op: op, Name: name, Key: key, Err: err}
}
