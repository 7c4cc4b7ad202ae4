package runtime

import (
	"context"
	"time"
)

// A turn is one owner's acquire or release call in flight on one lock.
//
// The lock scripts check the hold count the client expects (it is how they
// tell a resent request from a new one without writing a key per request),
// so the calls of one owner on one lock must not overlap: two goroutines
// sharing a hold ctx take turns. Calls of different owners, or
// on different locks, never wait for each other.
type turn struct {
	next chan struct{} // made by the first call waiting behind this one
}

// enter waits until no other call of field on key is in flight and makes
// this one the call in flight; exit ends it. It returns the hold count of
// field on key before the call and the PEXPIRE an acquisition with lease
// applies (see holdState). A ctx done while waiting ends the wait.
func (c *Client) enter(ctx context.Context, id holdID, lease time.Duration) (int, time.Duration, error) {
	sh := c.reg.shard(id.key)
	sh.mu.Lock()
	for {
		t, busy := sh.turns[id]
		if !busy {
			break
		}
		if t.next == nil {
			t.next = make(chan struct{})
			sh.turns[id] = t
		}
		sh.mu.Unlock()
		select {
		case <-t.next:
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		}
		sh.mu.Lock()
	}
	sh.turns[id] = turn{}
	count, px := holdStateLocked(sh, id, lease, c.opts.WatchdogTimeout)
	sh.mu.Unlock()
	return count, px, nil
}

// exit ends the call enter started and lets the next one in.
func (c *Client) exit(id holdID) {
	sh := c.reg.shard(id.key)
	sh.mu.Lock()
	t := sh.turns[id]
	delete(sh.turns, id)
	sh.mu.Unlock()
	if t.next != nil {
		close(t.next)
	}
}

// enterAll enters the turns of ids one by one, in their order (callers
// sort them, so two calls never wait on each other crosswise). It fills
// counts with the hold count of each and returns the longest PEXPIRE of
// them (see holdState).
func (c *Client) enterAll(ctx context.Context, ids []holdID, lease time.Duration, counts []int) (time.Duration, error) {
	var px time.Duration
	for i, id := range ids {
		n, p, err := c.enter(ctx, id, lease)
		if err != nil {
			c.exitAll(ids[:i])
			return 0, err
		}
		counts[i] = n
		px = max(px, p)
	}
	return px, nil
}

// exitAll exits the turns of ids.
func (c *Client) exitAll(ids []holdID) {
	for _, id := range ids {
		c.exit(id)
	}
}
