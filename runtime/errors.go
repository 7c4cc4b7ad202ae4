package runtime

import (
	"errors"
	"strings"
)

// Sentinel errors. Every error the runtime returns for a lock is a
// *LockError that wraps one of these (or a context or Redis error), so
// callers test with errors.Is and read the lock name and key from the
// *LockError with errors.As.
var (
	// ErrNotAcquired: the lock was held by someone else for the whole wait time.
	ErrNotAcquired = errors.New("lock not acquired within the wait time")
	// ErrLockLost: a hold ended without being released: its key was deleted
	// or expired, or the lease ran out before a renewal was confirmed. The
	// ctx of the hold is cancelled with a cause that wraps ErrLockLost.
	ErrLockLost = errors.New("lock lost")
	// ErrNotHeld: the ctx given to Unlock holds no acquisition of this lock
	// (never acquired, or already released). Redisson's IllegalMonitorStateException.
	ErrNotHeld = errors.New("lock not held by this owner")
	// ErrClosed: the Client was closed.
	ErrClosed = errors.New("lock client closed")
	// ErrUnavailable: Redis could not be reached within the wait time (or,
	// for a single try, the Client's ReleaseTimeout); it wraps the last
	// transport error. ErrNotAcquired, by contrast, means Redis answered
	// that someone held the lock.
	ErrUnavailable = errors.New("redis unavailable")
	// ErrDraining: the Client's Shutdown began; it takes no new locks.
	ErrDraining = errors.New("lock client shutting down")
	// ErrInvalidKey: a lock key is empty, or a key parameter cannot be rendered safely.
	ErrInvalidKey = errors.New("invalid lock key")
	// ErrInvalidLease: a lease is negative or too short to be useful.
	ErrInvalidLease = errors.New("invalid lease")
	// ErrInvalidArgument: some other argument is unusable, such as a nil fn.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrUpgrade: a reader asked for the write side of a read-write lock
	// it holds for reading. Waiting would deadlock on itself; release the
	// read hold first.
	ErrUpgrade = errors.New("read-to-write upgrade would deadlock")
	// ErrQuorum: fewer RedLock nodes than the quorum could be reached.
	ErrQuorum = errors.New("quorum not reached")
	// ErrNotReplicated: an acquisition was not acknowledged by
	// LockOptions.SyncReplicas replicas in time, and was undone.
	ErrNotReplicated = errors.New("acquisition not replicated")
	// ErrOutcomeUnknown: an acquire or release got no reply and Redis could
	// not be reached to settle it. An unconfirmed acquisition is never
	// renewed, so it expires with its lease.
	ErrOutcomeUnknown = errors.New("outcome unknown: redis unreachable")
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
	for depth := 0; err != nil && depth < 100; depth++ {
		if le, ok := err.(*LockError); ok && le.Name == name && le.Key == key {
			return true
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, inner := range u.Unwrap() {
				if wrapsLockError(inner, name, key) {
					return true
				}
			}
			return false
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		default:
			return false
		}
	}
	return false
}

func (e *LockError) Unwrap() error { return e.Err }
