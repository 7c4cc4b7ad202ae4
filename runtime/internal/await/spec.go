package await

import (
	"context"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/hub"
)

// Spec says where and how long to wait.
type Spec struct {
	// Channel is the channel to sleep on, and Key the key whose deletion
	// or expiry frees the lock (the hub watches it; "": none), unless At
	// names them.
	Channel, Key string
	// At, when set, names the channel and key on contention only
	// (building the names costs an allocation the uncontended path does
	// without); a multi-lock's change after each try (Dynamic).
	At       Waitee
	Dynamic  bool          // At may change after each try (multi-lock: the blocking member's)
	Shared   bool          // a reader: woken with all readers by a write unlock
	Wait     time.Duration // 0: one try; < 0: until ctx is done
	MaxSleep time.Duration // bound on one sleep, so the waiter refreshes its place; 0: none
	// Queue makes a newcomer let a hand-off in flight in this client
	// finish before its first try (exclusive locks, not a re-entry):
	// in-process FIFO (package hub).
	Queue bool
	// Wake is what a message on the channel wakes (see hub.Mode); the
	// zero value is a lock's.
	Wake hub.Mode
	// Until, when set, is when the whole call this wait is part of must
	// return (a multi-lock's or a RedLock's wait): no try runs past it.
	Until time.Time
	// Handed, when set, is a waiter that a release can hand the lock to;
	// nil: none.
	Handed Handee
	// Grants, when set, is a waiter whose tries queue it in Redis for
	// grants from releases of other processes; nil: none.
	Grants Queuer
	// Unsettled: a try whose outcome is unknown (errs.OutcomeUnknown)
	// ends the call with that error (and errs.Unavailable). Such a try
	// took what it took and nothing settles it (a plain semaphore's
	// permits have no ids): another try could take as much again, and
	// errs.NotAcquired at the end of the wait would tell the caller that
	// nothing was taken.
	Unsettled bool
}

// A Waitee names where a waiter sleeps (see Spec.At).
type Waitee interface {
	WaitChannel() string
	WaitKey() string
}

// A Handee is a waiter that a release can hand the lock to.
type Handee interface {
	// Grantee returns the owner token and lease argument a local release
	// hands the lock over with ("": not now).
	Grantee() (field string, px any)
	// Claim takes a lock handed over, or settles a hand-off whose outcome
	// is unknown; when it took the lock, the wait is over as after a
	// successful try.
	Claim(state hub.OfferState, marker string, sent time.Time) (bool, error)
	// WaitStarted is called when the waiter sleeps without a first try
	// (behind the Client's own waiters): the try would have reported the
	// wait as started.
	WaitStarted()
}

// A Queuer is a waiter that its tries queue in Redis for grants.
type Queuer interface {
	// Also is the companion channel subscribed with the waiter's, where
	// releases elsewhere grant this Client's waiters the lock.
	Also() string
	// Queued reports whether a try queued the waiter in Redis.
	Queued() bool
}

// names returns the channel and key of s.
func (s *Spec) names() (channel, key string) {
	if s.At != nil {
		return s.At.WaitChannel(), s.At.WaitKey()
	}
	return s.Channel, s.Key
}

// Try makes one acquisition attempt. When the lock is held by someone else
// it reports the holder's remaining lease (negative: no expiry), which
// bounds how long a waiter sleeps: a holder that crashed publishes nothing.
//
// A ttl of TTLWaiterFirst means the lock was not taken although it may be
// free: another waiter goes first (a reader behind a waiting writer). A
// wake-up this waiter used is then handed on to that waiter.
type Try func(ctx context.Context) (acquired bool, ttl time.Duration, err error)

// TTLWaiterFirst: see Try.
const TTLWaiterFirst time.Duration = -2

// LastTryGrace is how long the try at the end of a wait may take (a round
// trip, with room): what a call may take past its wait.
const LastTryGrace = 10 * time.Millisecond
