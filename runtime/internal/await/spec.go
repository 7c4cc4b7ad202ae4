package await

import (
	"context"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/hub"
)

// Spec says where and how long to wait.
type Spec struct {
	// Channel is the channel to sleep on, Key the key whose deletion or
	// expiry frees the lock ("": none), unless At names them (on
	// contention only: the names cost an allocation).
	Channel, Key string
	At           Waitee
	Dynamic      bool          // At may change after each try (multi-lock: the blocking member's)
	Shared       bool          // a reader: woken with all readers by a write unlock
	Wait         time.Duration // 0: one try; < 0: until ctx is done
	MaxSleep     time.Duration // bound on one sleep, so the waiter refreshes its place; 0: none
	Queue        bool          // in-process FIFO (package hub): an exclusive lock, not a re-entry
	Wake         hub.Mode      // what a message on the channel wakes; zero: a lock's
	// Need is the permits a semaphore's waiter takes (Wake is
	// hub.WakeCount): a wake-up for fewer goes on to the next waiter, which
	// they may serve (hub.Tried). 0: none said.
	Need int
	// Until, when set, is when the whole call this wait is part of must
	// return (a multi-lock's or a RedLock's wait): no try runs past it.
	Until  time.Time
	Handed Handee // a waiter a release can hand the lock to; nil: none
	Grants Queuer // a waiter its tries queue in Redis for grants; nil: none
	// Unsettled: a try whose outcome is unknown (errs.OutcomeUnknown) ends
	// the call with that error and errs.Unavailable: nothing settles it (a
	// plain semaphore's permits have no ids), and errs.NotAcquired would
	// say that nothing was taken.
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
	// is unknown; it reports whether it took the lock.
	Claim(state hub.OfferState, marker string, sent time.Time) (bool, error)
	// WaitStarted is called when the waiter sleeps without a first try,
	// which would have reported the wait as started.
	WaitStarted()
}

// A Queuer is a waiter that its tries queue in Redis for grants.
type Queuer interface {
	Also() string // the companion channel where releases elsewhere grant the lock
	// Queued reports whether a try queued the waiter in Redis.
	Queued() bool
}

// gateKey is the key whose node's admission gate a fresh acquisition
// waits in: the lock's, or else its channel (of the same slot).
func (s *Spec) gateKey() string {
	switch {
	case s.At != nil:
		return s.At.WaitKey()
	case s.Key != "":
		return s.Key
	}
	return s.Channel
}

func (s *Spec) names() (channel, key string) {
	if s.At != nil {
		return s.At.WaitChannel(), s.At.WaitKey()
	}
	return s.Channel, s.Key
}

// Try makes one acquisition attempt. When the lock is held by someone else
// it reports the holder's remaining lease (negative: no expiry), which
// bounds the sleep: a holder that crashed publishes nothing.
// TTLWaiterFirst: not taken although it may be free, as another waiter
// goes first (a reader behind a waiting writer), which gets the wake-up
// this one used.
type Try func(ctx context.Context) (acquired bool, ttl time.Duration, err error)

// TTLWaiterFirst: see Try.
const TTLWaiterFirst time.Duration = -2

// LastTryGrace is how long the try at the end of a wait may take past it.
const LastTryGrace = 10 * time.Millisecond
