package runtime

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/lua"
)

// watchdog is the one renewal loop of a Client. Every WatchdogTimeout/3 it
// extends the lease of every watchdog hold with RenewBatch calls of at most
// 100 keys, grouped by cluster slot and sent in one pipeline. A hold whose
// field is gone is lost at once; a hold whose renewal cannot be confirmed
// is lost when its lease (minus drift) runs out.
//
// Release removes a hold from the registry before the release is sent, so
// no renewal is scheduled after an unlock; a renewal already in flight only
// extends a key whose field still names the owner, which after the release
// is never the case.
type watchdog struct {
	once   sync.Once
	done   chan struct{}
	loaded bool // the renewal script was loaded (used by the loop only)
}

// start launches the loop on first use. Called with c.mu held.
func (w *watchdog) start(c *Client) {
	w.once.Do(func() {
		w.done = make(chan struct{})
		go c.watchdogLoop(w.done)
	})
}

// wait blocks until the loop (if started) has stopped; c.closeCh is closed.
func (w *watchdog) wait() {
	w.once.Do(func() {}) // no loop may start after this
	if w.done != nil {
		<-w.done
	}
}

func (c *Client) watchdogLoop(done chan struct{}) {
	defer close(done)
	period := c.opts.WatchdogTimeout / 3
	nextRenew := time.Now().Add(period)
	timer := time.NewTimer(period)
	defer timer.Stop()
	for {
		select {
		case <-c.closeCh:
			return
		case <-timer.C:
		}
		if !time.Now().Before(nextRenew) {
			start := time.Now()
			c.renewAll(period)
			nextRenew = start.Add(period)
		}
		wake := c.expireOverdue(time.Now())
		if wake.IsZero() || wake.After(nextRenew) {
			wake = nextRenew
		}
		timer.Reset(max(time.Until(wake), time.Millisecond))
	}
}

// expireOverdue loses every watchdog hold whose lease (minus drift) ended
// without a confirmed renewal, and forgets every fixed-lease hold whose
// lease ended (its holder never unlocked it), and returns the earliest such
// deadline of the holds that remain (zero if none).
func (c *Client) expireOverdue(now time.Time) time.Time {
	d := drift(c.opts.WatchdogTimeout)
	var earliest time.Time
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, h := range c.holds {
		validUntil, why := h.expiresAt, "fixed lease ran out"
		if h.watchdog {
			validUntil, why = h.expiresAt.Add(-d), "lease ran out without a confirmed renewal"
		}
		if !now.Before(validUntil) {
			c.loseLocked(h, &LockError{Op: "renew", Name: h.name, Key: h.key, Err: fmt.Errorf("%w: %s", ErrLockLost, why)})
			continue
		}
		if earliest.IsZero() || validUntil.Before(earliest) {
			earliest = validUntil
		}
	}
	return earliest
}

// renewAll runs one watchdog round.
func (c *Client) renewAll(period time.Duration) {
	c.mu.Lock()
	holds := make([]*hold, 0, len(c.holds))
	for _, h := range c.holds {
		if h.watchdog {
			holds = append(holds, h)
		}
	}
	if len(holds) == 0 {
		c.mu.Unlock()
		return
	}
	if c.cluster {
		sort.Slice(holds, func(i, j int) bool { return holds[i].slot < holds[j].slot })
	}
	extra := make(map[*hold][]string)
	for _, h := range holds {
		if keys := h.k.extraKeys(h.key, h.owner, h.count); len(keys) > 0 {
			extra[h] = keys
		}
	}
	c.mu.Unlock()
	batches := splitBatches(holds, extra, c.cluster)

	ctx, cancel := context.WithTimeout(context.Background(), period)
	defer cancel()
	if !c.wd.loaded {
		// Load the script before the first round, so that even that one is
		// one EVALSHA per batch (a failure is handled below, per batch).
		c.wd.loaded = lua.RenewBatch.Load(ctx, c.rdb).Err() == nil
	}
	sent := time.Now()
	lease := strconv.FormatInt(c.opts.WatchdogTimeout.Milliseconds(), 10)
	cmds, err := c.runRenewals(ctx, batches, extra, lease)

	renewed := 0
	c.mu.Lock()
	for i, b := range batches {
		if cmds == nil || cmds[i].Err() != nil {
			continue // unconfirmed: these holds keep their deadline
		}
		res, _ := cmds[i].Int64Slice()
		for j, h := range b {
			if h.gone || j >= len(res) {
				continue
			}
			if res[j] == 1 {
				h.expiresAt = sent.Add(c.opts.WatchdogTimeout)
				renewed++
			} else {
				c.loseLocked(h, &LockError{Op: "renew", Name: h.name, Key: h.key,
					Err: fmt.Errorf("%w: the key no longer holds this owner", ErrLockLost)})
			}
		}
	}
	c.mu.Unlock()
	if err != nil {
		c.log.Warn("watchdog renewal failed", "holds", len(holds), "err", err)
	}
	c.observe(Event{Kind: EventRenewed, Renewed: renewed, Calls: len(batches), Err: err})
}

// splitBatches cuts holds (sorted by slot on a cluster) into batches of at
// most lua.MaxBatch keys (a hold's hash and its extra keys) of one slot.
func splitBatches(holds []*hold, extra map[*hold][]string, bySlot bool) [][]*hold {
	var batches [][]*hold
	for start := 0; start < len(holds); {
		keys := 1 + len(extra[holds[start]])
		end := start + 1
		for end < len(holds) && (!bySlot || holds[end].slot == holds[start].slot) {
			n := 1 + len(extra[holds[end]])
			if keys+n > lua.MaxBatch {
				break
			}
			keys += n
			end++
		}
		batches = append(batches, holds[start:end])
		start = end
	}
	return batches
}

// runRenewals sends one RenewBatch per batch in a single pipeline. When
// the server's script cache lacks the script (first round, restart, SCRIPT
// FLUSH), it is loaded once (on every master of a cluster) and the refused
// batches are sent again by SHA, rather than each as a full EVAL.
func (c *Client) runRenewals(ctx context.Context, batches [][]*hold, extra map[*hold][]string, lease string) ([]*redis.Cmd, error) {
	keys := make([][]string, len(batches))
	args := make([][]any, len(batches))
	for i, b := range batches {
		keys[i] = make([]string, 0, len(b))
		args[i] = make([]any, 1, 2*len(b)+1)
		args[i][0] = lease
		for _, h := range b {
			keys[i] = append(keys[i], h.key)
			keys[i] = append(keys[i], extra[h]...)
			args[i] = append(args[i], h.field, len(extra[h]))
		}
	}
	cmds := make([]*redis.Cmd, len(batches))
	pipe := c.rdb.Pipeline()
	for i := range batches {
		cmds[i] = lua.RenewBatch.EvalSha(ctx, pipe, keys[i], args[i]...)
	}
	_, err := pipe.Exec(ctx)
	if err == nil {
		return cmds, nil
	}
	var retry []int
	for i, cmd := range cmds {
		if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			retry = append(retry, i)
		}
	}
	if len(retry) == 0 {
		return cmds, err
	}
	loaded := lua.RenewBatch.Load(ctx, c.rdb).Err() == nil
	pipe = c.rdb.Pipeline()
	for _, i := range retry {
		if loaded {
			cmds[i] = lua.RenewBatch.EvalSha(ctx, pipe, keys[i], args[i]...)
		} else {
			cmds[i] = lua.RenewBatch.Eval(ctx, pipe, keys[i], args[i]...)
		}
	}
	_, err = pipe.Exec(ctx)
	return cmds, err
}
