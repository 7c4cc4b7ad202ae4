package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Shutdown stops the Client gracefully, as http.Server.Shutdown does a
// server, then closes it:
//
//  1. New acquisitions fail at once with an error wrapping ErrDraining,
//     and waiters that are not part of running work stop waiting with it.
//     An acquisition whose ctx carries a hold of this Client (a re-entry,
//     or a nested lock that running work needs to finish) still goes on.
//  2. It waits until every hold was released, or ctx is done.
//  3. What is still held then is ended: the hold's ctx is cancelled with a
//     cause wrapping ErrDraining and its lock is given back in Redis (so
//     another process need not wait out its lease), within the Client's
//     ReleaseTimeout.
//  4. It closes the Client (see Close).
//
// It returns nil when every hold ended on its own, or ctx's error when
// some had to be cut. Close, without Shutdown, keeps its meaning: holds
// end at once.
func (c *Client) Shutdown(ctx context.Context) error {
	c.drain()
	var cut error
	if !c.waitIdle(ctx) {
		cut = ctx.Err()
		c.cutHolds()
	}
	return errors.Join(cut, c.Close())
}

// drain refuses new acquisitions from now on (see Shutdown), on the
// Client and its RedLock nodes.
func (c *Client) drain() {
	c.drainOnce.Do(func() { close(c.drainCh) })
	for _, n := range c.redNodes {
		n.drain()
	}
}

// draining reports whether Shutdown began.
func (c *Client) draining() bool {
	select {
	case <-c.drainCh:
		return true
	default:
		return false
	}
}

// refuseFresh returns the error of an acquisition refused by Shutdown: a
// fresh one (ctx carries no hold of this Client) once draining began.
func (c *Client) refuseFresh(ctx context.Context) error {
	if c.holdOf(ctx) == nil && c.draining() {
		return fmt.Errorf("%w: Shutdown began", ErrDraining)
	}
	return nil
}

// holdCount counts the holds of the Client and its RedLock nodes.
func (c *Client) holdCount() int {
	n := c.reg.Len()
	for _, r := range c.redNodes {
		n += r.holdCount()
	}
	return n
}

// waitIdle waits until no hold is left, or ctx is done (false).
func (c *Client) waitIdle(ctx context.Context) bool {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for c.holdCount() > 0 {
		select {
		case <-ctx.Done():
			return c.holdCount() == 0
		case <-tick.C:
		}
	}
	return true
}

// cutHolds ends every hold left, gives their locks back in the background
// (giveback.go) and waits for that up to ReleaseTimeout.
func (c *Client) cutHolds() {
	c.reg.LoseAll(func(h *hold) error {
		return &LockError{Op: "shutdown", Name: h.Name, Key: h.Key,
			Err: fmt.Errorf("%w: Shutdown's ctx ended before the hold was released", ErrDraining)}
	})
	for _, n := range c.redNodes {
		n.cutHolds()
	}
	deadline := time.Now().Add(c.opts.ReleaseTimeout)
	for !c.settler.Idle() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
}
