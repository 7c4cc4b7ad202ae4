package runtime

import (
	"context"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/holds"
	"github.com/lockgen/lockgen/runtime/internal/settle"
)

// Giving back a lost hold: a Mutex's is package mutex's (taker); a
// Semaphore's is here.

// semaphoreTaker is a Semaphore as the registry sees it (holds.Taker).
type semaphoreTaker Semaphore

// ExtraKeys: none, renew_batch.lua finds the permit ids in the hold's field.
func (*semaphoreTaker) ExtraKeys(*holds.Hold) []string { return nil }

// GiveBackLost releases the permit ids of h, resending until Redis
// answers: a resend finds the ids gone and frees nothing twice.
func (t *semaphoreTaker) GiveBackLost(h *holds.Hold) {
	s := (*Semaphore)(t)
	c := s.c
	a, marker := h.Args, s.marker(h.Field)
	c.env.Settler.Add(settle.Job{
		Try: func(ctx context.Context) bool {
			// An error reply (READONLY, LOADING in a failover) is tried
			// again: the job goes behind the others meanwhile.
			_, err := s.releaseOnce(ctx, c.env.Renewal, a, marker)
			return err == nil
		},
		Until: time.Now().Add(c.env.GiveBackFor()),
	})
}
