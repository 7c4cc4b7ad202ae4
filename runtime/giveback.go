package runtime

import (
	"context"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/settle"
)

// Giving back a lost hold.
//
// The clock ends a watchdog hold at its deadline when no renewal of it was
// confirmed in time (the lease clock, package holds). The renewals sent meanwhile may still have
// reached Redis, each setting a full lease again: what was lost were the
// replies (a one-way fault, replies delayed past the deadline). Redis then
// keeps the lock for an owner whose ctx is done, and every other owner
// waits out a lease that nobody uses. So the handle that took the hold
// gives back, in the background and as soon as Redis answers, whatever its
// owner still has there. The scripts it runs check the owner: nothing of
// another owner is touched, and a renewal arriving later finds the owner
// gone and extends nothing.

// giveBackFor bounds a give-back: by then Redis has expired what a renewal
// sent before the loss set, unless the network held that renewal back for
// more than a lease.
func giveBackFor(watchdog time.Duration) time.Duration { return 2 * watchdog }

// GiveBackLost marks the outcome of the owner's holds unknown, so its
// next call (an Unlock of the lost hold) re-reads them first, and settles
// that in the background: reconcile gives back every hold Redis still has
// of the owner, whose local count is now 0.
func (t *mutexTaker) GiveBackLost(h *hold) {
	m := (*Mutex)(t)
	m.settleLater(h.Args, nil, giveBackFor(m.c.opts.WatchdogTimeout), m.c.reg.MarkLost(h))
}

// semaphoreTaker is a Semaphore as the registry sees it (see mutexTaker).
type semaphoreTaker Semaphore

// ExtraKeys: none, renew_batch.lua finds the permit ids in the hold's field.
func (*semaphoreTaker) ExtraKeys(*hold) []string { return nil }

// GiveBackLost releases the permit ids of h, resending until Redis
// answers: a resend finds the ids gone and frees nothing twice.
func (t *semaphoreTaker) GiveBackLost(h *hold) {
	s := (*Semaphore)(t)
	c := s.c
	a, marker := h.Args, s.marker(h.Field)
	c.settler.Add(settle.Job{
		Try: func(ctx context.Context) bool {
			// An error reply (READONLY, LOADING in a failover) is tried
			// again: the job goes behind the others meanwhile.
			_, err := s.releaseOnce(ctx, c.renewal, a, marker)
			return err == nil
		},
		Until: time.Now().Add(giveBackFor(c.opts.WatchdogTimeout)),
	})
}
