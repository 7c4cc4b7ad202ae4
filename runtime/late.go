package runtime

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime/internal/scripts"
	"github.com/lockgen/lockgen/runtime/internal/settle"
)

// Late replies.
//
// On a go-redis client that does not honour a ctx's deadline on socket
// reads (default options), a call that has not had its reply by its
// deadline is abandoned (scripts.Abandoned): its caller returns on time,
// and the command goes on to its reply. On a server that is only slow,
// the reply comes, and it is real: an acquire may have taken the lock for
// an owner whose caller was told it did not. Handing that to settlement
// would leave a request marker for each such call and turn every slow
// reply into an unknown outcome, so the call resolves its own outcome from
// what actually happened: what it took is given back, a waiter it queued
// withdrawn. Only a call whose reply never comes (its connection failed)
// is settled like any lost reply, with its request marker. Until the
// outcome comes, the registry counts the call late (holds.Registry.Abandon):
// the owner's next call waits for it before it re-reads the count.

// replied reports whether a call that failed with err (or succeeded) had
// its outcome decided in Redis: it has a reply, or it provably never left.
func replied(err error) bool {
	return err == nil || scripts.IsReply(err) || scripts.NotSent(err)
}

// resolveLate takes over a Semaphore's acquire attempt that its caller
// abandoned. Permits the late reply says it took are given back; when no
// reply comes, the permits are released all the same: the release marks
// the request done, so no copy of it still on its way takes them later,
// and frees them if it did take them.
func (s *Semaphore) resolveLate(p *scripts.Pending, a lockArgs, marker string) {
	c := s.c
	p.Then(func(cmd *redis.Cmd) {
		if ttl, err := cmd.Int64(); replied(err) && (err != nil || ttl != 0) {
			return // not taken
		}
		c.settler.Add(settle.Job{
			Try: func(ctx context.Context) bool {
				_, err := s.releaseOnce(ctx, c.renewal, a, marker)
				return err == nil
			},
			Until: time.Now().Add(giveBackFor(c.opts.WatchdogTimeout)),
		})
	})
}

// resolveLate takes over a PlainSemaphore's acquire attempt of n permits
// that its caller abandoned (and was told ErrOutcomeUnknown: the permits
// may be taken). Permits the late reply says it took are given back. No
// reply leaves the outcome unknown for good, as for any lost reply (a
// plain semaphore's permits have no ids to settle by), and says so in a
// warning.
func (p *PlainSemaphore) resolveLate(pd *scripts.Pending, n int) {
	c := p.c
	pd.Then(func(cmd *redis.Cmd) {
		took, err := cmd.Int64()
		switch {
		case !replied(err):
			c.warn("an acquire abandoned at its deadline had no reply: its permits may be taken", "semaphore", p.name, "key", p.key, "permits", n)
			return
		case err != nil || took != 1:
			return
		}
		c.settler.Add(settle.Job{
			// Sent once, as every change of the count (a resend could add
			// the permits twice): tried again only when it never left.
			Try: func(ctx context.Context) bool {
				err := scripts.PlainSemaphoreRelease.RunOnce(ctx, c.renewal, 2, []any{3: p.key, p.channel, n, c.publish}).Err()
				if err != nil && !scripts.NotSent(err) && !scripts.IsReply(err) {
					c.warn("giving back the permits of an abandoned acquire failed: Redis did not answer", "semaphore", p.name, "key", p.key, "permits", n)
				}
				return !scripts.NotSent(err)
			},
			Until: time.Now().Add(giveBackFor(c.opts.WatchdogTimeout)),
		})
	})
}

// resolveLate takes over an atomic MultiLock's attempt on every member
// (args, ids) that its caller abandoned, in the owner's turns, as
// Mutex.resolveLate does for one lock: the members' outcomes are unknown
// until the call's comes (no call of the owner reconciles them before:
// holds.Registry.Abandon); then what it took is given back, member by member, once
// nothing of the request can still arrive (after the first member's
// settlement, which decides them all, when no reply comes: count0 is the
// owner's count of it before the attempt).
func (l *MultiLock) resolveLate(p *scripts.Pending, args []lockArgs, ids []holdID, count0 int, marker string, px time.Duration) {
	c := l.c
	gens := make([]uint64, len(ids))
	for i, id := range ids {
		gens[i] = c.reg.Abandon(id)
	}
	p.Then(func(cmd *redis.Cmd) {
		defer func() {
			for _, id := range ids {
				c.reg.Landed(id)
			}
		}()
		settled := replied(cmd.Err())
		c.settler.Add(settle.Job{
			Try: func(ctx context.Context) bool {
				if !settled {
					at := attempt{via: c.renewal, marker: marker, count: count0}
					if _, err := (reentrant{}).settle(ctx, l.members[0], args[0], at); err != nil {
						return false
					}
					settled = true
				}
				for i, m := range l.members {
					if !m.settleOnce(ctx, ids[i], args[i], nil, gens[i]) {
						return false
					}
				}
				return true
			},
			Until: time.Now().Add(px),
			Quit: func() {
				for i, id := range ids {
					_, _, _ = c.reg.Enter(context.Background(), id, 0)
					c.reg.DropMark(id, gens[i])
					c.reg.Exit(id)
				}
			},
		})
	})
}
