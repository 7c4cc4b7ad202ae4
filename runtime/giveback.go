package runtime

import (
	"context"
	"fmt"
	"time"
)

// Giving back a lost hold.
//
// The clock ends a watchdog hold at its deadline when no renewal of it was
// confirmed in time (lease.go). The renewals sent meanwhile may still have
// reached Redis, each setting a full lease again: what was lost were the
// replies (a one-way fault, replies delayed past the deadline). Redis then
// keeps the lock for an owner whose ctx is done, and every other owner
// waits out a lease that nobody uses. So the handle that took the hold
// gives back, in the background and as soon as Redis answers, whatever its
// owner still has there. The scripts it runs check the owner: nothing of
// another owner is touched, and a renewal arriving later finds the owner
// gone and extends nothing.

// A giver is the handle that took a hold (Mutex or Semaphore: every hold
// has one).
type giver interface {
	// giveBackLost starts giving back what the owner of h, ended at its
	// deadline, still has in Redis. h.sh.mu is held: it must not block.
	// After Close it does nothing (the settler refuses new work).
	giveBackLost(h *hold)
}

// giveBackFor bounds a give-back: by then Redis has expired what a renewal
// sent before the loss set, unless the network held that renewal back for
// more than a lease.
func (c *Client) giveBackFor() time.Duration { return 2 * c.opts.WatchdogTimeout }

// giveBackLost marks the outcome of the owner's holds unknown, so its
// next call (an Unlock of the lost hold) re-reads them first, and settles
// that in the background: reconcile gives back every hold Redis still has
// of the owner, whose local count is now 0.
func (m *Mutex) giveBackLost(h *hold) {
	gen := m.c.markUnknownLocked(h.sh, holdID{h.key, h.field})
	m.settleLater(h.args, nil, m.c.giveBackFor(), gen)
}

// giveBackLost releases the permit ids of h, resending until Redis
// answers: a resend finds the ids gone and frees nothing twice.
func (s *Semaphore) giveBackLost(h *hold) {
	c := s.c
	a, marker := h.args, s.marker(h.field)
	c.settleInBackground(settleJob{
		try: func(ctx context.Context) bool {
			// An error reply (READONLY, LOADING in a failover) is tried
			// again: the job goes behind the others meanwhile.
			_, err := s.releaseOnce(ctx, c.wd.rdb, a, marker)
			return err == nil
		},
		until: time.Now().Add(c.giveBackFor()),
		quit:  func() {},
	})
}

// dropLost releases acq of a lost hold, and returns why it was lost (or
// that it was released already). It sends nothing and does not wait for
// the owner's turn: a give-back under way may hold that turn for as long
// as Redis is cut off, and it alone gives back what Redis may still have.
func (c *Client) dropLost(acq *acquisition) error {
	_, _, _, lost, ok := c.dropAcquisition(acq)
	if !ok {
		return fmt.Errorf("%w: already released", ErrNotHeld)
	}
	acq.end(context.Canceled)
	return lost
}
