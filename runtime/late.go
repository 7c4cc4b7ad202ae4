package runtime

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime/internal/lockenv"
	"github.com/lockgen/lockgen/runtime/internal/scripts"
	"github.com/lockgen/lockgen/runtime/internal/settle"
)

// Late replies of the other kinds' calls abandoned at their deadline
// (see lockenv.Replied for why a late reply resolves its own outcome).

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
		case !lockenv.Replied(err):
			c.env.Warn("an acquire abandoned at its deadline had no reply: its permits may be taken", "semaphore", p.name, "key", p.key, "permits", n)
			return
		case err != nil || took != 1:
			return
		}
		c.env.Settler.Add(settle.Job{
			// Sent once, as every change of the count (a resend could add
			// the permits twice): tried again only when it never left.
			Try: func(ctx context.Context) bool {
				err := scripts.PlainSemaphoreRelease.RunOnce(ctx, c.env.Renewal, 2, []any{3: p.key, p.channel, n, c.env.Publish}).Err()
				if err != nil && !scripts.NotSent(err) && !scripts.IsReply(err) {
					c.env.Warn("giving back the permits of an abandoned acquire failed: Redis did not answer", "semaphore", p.name, "key", p.key, "permits", n)
				}
				return !scripts.NotSent(err)
			},
			Until: time.Now().Add(c.env.GiveBackFor()),
		})
	})
}
