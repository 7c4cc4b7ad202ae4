package runtime

import (
	"context"
	"time"
)

// ParkedWaiters counts the goroutines of m's Client asleep on m's channel
// that a release could hand the lock to now (see hub.Offer: parked, no
// wake-up pending, the subscription confirmed): tests wait for it before
// they release.
func ParkedWaiters(m *Mutex) int { return m.c.env.Hub.Idle(m.e.WaitChannel(""), true) }

// IdleWaiters counts the goroutines of m's Client waiting for m with no
// wake-up pending or in use: ParkedWaiters for waiters a release may hand
// the lock to, and for the others (a nested owner's, or once hand-offs are
// off) every such waiter registered on the confirmed channel, asleep or
// about to be.
func IdleWaiters(m *Mutex) int { return m.c.env.Hub.Idle(m.e.WaitChannel(""), false) }

// StallRenewals makes c's watchdog see a renewal call in flight whose
// oldest hold was due long ago (see watchdog.Watchdog.Stall).
func StallRenewals(c *Client) (release func()) { return c.wd.Stall() }

// AdmissionClosed reports whether an admission gate of c (the server's,
// or a cluster master's) holds fresh acquisitions back.
func AdmissionClosed(c *Client) bool { return c.wd.GateClosed() }

// HoldDeadline is the lease clock's deadline of the hold whose ctx (of c)
// is hctx: where the clock ends it unless a confirmation moves it on. A
// test compares it with the key's expiry in Redis, which the time a test
// goroutine sees the ctx done is not (it runs late on a loaded box).
func HoldDeadline(c *Client, hctx context.Context) time.Time {
	return c.env.Reg.Of(hctx).Acquisition().Hold().Deadline()
}

// SetRedSleepBound sets how long l's waiters sleep at most without a
// wake-up (redlock.SleepBound): a test makes it longer than its wait, so
// that only a message or key tracking can wake them in time.
func SetRedSleepBound(l *RedLock, d time.Duration) { l.e.SleepBound = d }

// SettlerIdle reports whether c's settler has no background work left
// (package settle): a waiter's leave that overran its bound, a give-back.
func SettlerIdle(c *Client) bool { return c.env.Settler.Idle() }

// RedNodes are the Clients of c's RedLock nodes, one per node.
func RedNodes(c *Client) []*Client { return c.redNodes }

// ErrNotMade is what a call on a handle (or Client) no Client made returns.
var ErrNotMade = errNotMade
