package lockenv

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/lockgen/lockgen/internal/redisnames"
	"github.com/lockgen/lockgen/runtime/internal/errs"
	"github.com/lockgen/lockgen/runtime/internal/holds"
	"github.com/lockgen/lockgen/runtime/internal/scripts"
)

// LostError is the cause of the loss of h: a LockError (Env.Fail) wrapping errs.LockLost.
func (e *Env) LostError(h *holds.Hold, why string) error {
	return e.Fail("renew", h.Name, h.Key, fmt.Errorf("%w: %s", errs.LockLost, why))
}

// AddHold records an acquisition sent at start and returns the hold's ctx,
// or errs.Closed once the registry is closed.
func (e *Env) AddHold(parent context.Context, spec holds.Spec, args holds.Args, lease time.Duration, start time.Time) (context.Context, error) {
	if lease != Watchdog {
		spec.LeaseEnd = e.Fail("lease", spec.Name, spec.Key, fmt.Errorf("%w: fixed lease of %v ran out", errs.LockLost, lease))
	}
	hc := e.Reg.Add(parent, spec, args, lease, start)
	if hc == nil {
		return nil, errs.Closed
	}
	return hc, nil
}

// DropLost releases acq of a lost hold and returns why it was lost
// (errs.NotHeld if released already). It sends nothing and takes no turn:
// a give-back may hold it while Redis is cut off, and it alone gives back
// what Redis may still have.
func (e *Env) DropLost(acq *holds.Acquisition) error {
	d, ok := e.Reg.Drop(acq)
	if !ok {
		return fmt.Errorf("%w: already released", errs.NotHeld)
	}
	acq.End(context.Canceled)
	return d.Lost
}

// MarkUnknown records that the outcome of the call in id's turn is
// unknown, and returns the mark's generation (0: err is no unknown
// outcome). The caller has the turn.
func (e *Env) MarkUnknown(id holds.ID, err error) uint64 {
	if !errors.Is(err, errs.OutcomeUnknown) {
		return 0
	}
	return e.Reg.MarkUnknown(id)
}

// GiveBackFor bounds a give-back: by then Redis has expired what a renewal
// sent before the loss set, unless the network held that renewal back for
// more than a lease.
func (e *Env) GiveBackFor() time.Duration { return 2 * e.Watchdog }

// RequestMarker names the marker key of one acquire request (one key per
// request, written off the hot path): it makes the request's outcome
// final, so no later copy takes the lock.
func RequestMarker(key, requestID string) string {
	return redisnames.PrefixWith("lockgen_latch", key, requestID)
}

// Validate checks a lock key and a lease, for every kind of lock.
func Validate(key string, lease time.Duration) error {
	// Redisson's name helpers leave a key with a "{" alone, and wrap one
	// without in braces: a lock's keys share a slot only if a "{" opens a
	// hash tag as Redis reads one, and a key without one has no "}".
	open := strings.IndexByte(key, '{')
	switch {
	case key == "":
		return fmt.Errorf("%w: empty key", errs.InvalidKey)
	case open >= 0 && strings.IndexByte(key[open+1:], '}') <= 0:
		return fmt.Errorf("%w: %q has a '{' that opens no hash tag (a lock's other keys would land in other cluster slots); write a tag like {tenant} or escape the brace", errs.InvalidKey, key)
	case open < 0 && strings.IndexByte(key, '}') >= 0:
		return fmt.Errorf("%w: %q has a '}' that closes no hash tag (a lock's other keys would land in other cluster slots); write a tag like {tenant} or drop the brace", errs.InvalidKey, key)
	case lease < 0:
		return fmt.Errorf("%w: negative lease %v (use Watchdog or a positive duration)", errs.InvalidLease, lease)
	case lease > 0 && lease < MinLease:
		return fmt.Errorf("%w: lease %v is shorter than %v", errs.InvalidLease, lease, MinLease)
	}
	return nil
}

// Replied reports whether a call that failed with err (or succeeded) had
// its outcome decided in Redis: it has a reply, or it provably never left.
// A call abandoned at its deadline (scripts.Abandoned) resolves its
// outcome from its late reply, which is real (an acquire may have taken
// the lock), giving back what it took; only one whose reply never comes
// is settled like any lost reply.
func Replied(err error) bool {
	return err == nil || scripts.IsReply(err) || scripts.NotSent(err)
}
