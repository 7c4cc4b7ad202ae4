package mutex

import (
	"context"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/hub"
)

// Acquiring is one acquisition of a Lock in progress, as the wait loop
// sees it (await.Waitee, Handee, Queuer), until Record records its hold.
type Acquiring struct {
	m       *Lock
	ctx     context.Context
	a       lockArgs
	lease   time.Duration
	start   time.Time
	sent    time.Time // when the last try (or the hand-off that took the lock) was sent
	waiting bool      // it waits if the first try does not take the lock
	// handOffs: a release of this Client may hand it the lock, or one of
	// another process grant it; otherwise only a fair release grants it.
	handOffs  bool
	nonce     string        // the last try's: a grant claimed must carry it
	queued    bool          // a try queued it in Redis: its release clears its record
	confirmed time.Duration // what of the lease a claimed grant confirmed (0: all)
	fence     int64         // a fenced lock's token, once taken
	started   bool          // EventWaitStarted was reported (once a wait)
}

// Record records the hold taken and returns its ctx, then ends the turn the try kept.
func (w *Acquiring) Record() (context.Context, error) {
	m, c := w.m, w.m.env
	id := holdID{Key: m.key, Field: w.a.FieldID()}
	spec := m.spec()
	spec.Confirmed, spec.Queued, spec.Fence = w.confirmed, w.queued, w.fence
	defer c.Reg.Exit(id)
	hctx, err := c.AddHold(w.ctx, spec, w.a, w.lease, w.sent)
	if err != nil {
		// Closed while acquiring: give the lock back rather than leave it.
		count, _ := c.Reg.State(id, w.lease)
		_, _ = m.release(w.ctx, c.RDB, w.a, count == 0, c.Watchdog, count+1)
		return nil, m.fail("acquire", err)
	}
	return hctx, nil
}

// Sent is when the try (or the hand-off) that took the lock was sent.
func (w *Acquiring) Sent() time.Time { return w.sent }

func (w *Acquiring) WaitChannel() string { return w.m.kind.channel(w.m.key, w.a.OwnerID()) }
func (w *Acquiring) WaitKey() string     { return w.m.key }
func (w *Acquiring) Also() string        { return w.m.grantNames().channel }
func (w *Acquiring) Queued() bool        { return w.queued }

func (w *Acquiring) WaitStarted() {
	if report := w.m.env.WaitStarted; !w.started && report != nil {
		report(w.ctx, w.m.opts.Name, w.m.key, kindNames[w.m.kind], time.Since(w.start))
	}
	w.started = true
}

func (w *Acquiring) Grantee() (string, any) {
	c, id := w.m.env, holdID{Key: w.m.key, Field: w.a.FieldID()}
	if !w.handOffs {
		return id.Field, nil // a fair lock's: granted in Redis, nothing to pass
	}
	if c.Reg.Unknown(id) {
		return "", nil // its next try reconciles first
	}
	_, px := c.Reg.State(id, w.lease)
	return id.Field, c.LeaseArg(px)
}

// Claim takes the lock a release gave this waiter, or settles a local
// hand-off whose outcome is unknown, in the owner's turn (kept when it
// took the lock; free, as a waiter's owner holds nothing).
func (w *Acquiring) Claim(state hub.OfferState, marker string, at time.Time) (took bool, err error) {
	m, c := w.m, w.m.env
	id := holdID{Key: m.key, Field: w.a.FieldID()}
	if w.handOffs && state != hub.OfferRemote {
		_, px, err := c.Reg.Enter(context.WithoutCancel(w.ctx), id, w.lease)
		if err != nil {
			return false, err
		}
		if took = state == hub.OfferGranted; !took {
			took, err = m.settleLost(w.ctx, w.a, attempt{via: c.RDB, px: c.LeaseArg(px), marker: marker}, px)
		}
		if took {
			w.sent = at // the hold's lease runs from the hand-off's send
		} else {
			c.Reg.Exit(id)
		}
		return took, err
	}
	return w.claimGrant(marker), nil
}
