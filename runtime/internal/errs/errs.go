package errs

import "errors"

// The sentinels; package runtime documents each (errors.go).
var (
	NotAcquired     = errors.New("lock not acquired within the wait time")
	LockLost        = errors.New("lock lost")
	NotHeld         = errors.New("lock not held by this owner")
	Closed          = errors.New("lock client closed")
	Unavailable     = errors.New("redis unavailable")
	Draining        = errors.New("lock client shutting down")
	InvalidKey      = errors.New("invalid lock key")
	InvalidLease    = errors.New("invalid lease")
	InvalidArgument = errors.New("invalid argument")
	Upgrade         = errors.New("read-to-write upgrade would deadlock")
	Quorum          = errors.New("quorum not reached")
	NotReplicated   = errors.New("acquisition not replicated")
	OutcomeUnknown  = errors.New("outcome unknown: redis unreachable")
)
