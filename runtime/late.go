package runtime

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime/internal/scripts"
)

// Late replies.
//
// On a go-redis client that does not honour a ctx's deadline on socket
// reads (default options), a call that has not had its reply by the end
// of its ctx is abandoned (scripts.Abandoned): its caller returns on time,
// and the command goes on to its reply. On a server that is only slow,
// the reply comes, and it is real: an acquire may have taken the lock for
// an owner whose caller was told it did not. Handing that to settlement
// would leave a request marker for each such call and turn every slow
// reply into an unknown outcome, so the call resolves its own outcome from
// what actually happened: what it took is given back, a waiter it queued
// withdrawn. Only a call whose reply never comes (its connection failed)
// is settled like any lost reply, with its request marker.

// resolveLate takes over an acquire attempt at that a new acquisition of
// the lock (the owner had none of it) abandoned, in the owner's turn. The
// caller gets no hold from it, so the owner's outcome on the lock is
// unknown until the call's outcome comes; then the owner's count in Redis
// is brought back to the client's (reconcile: what the call took is given
// back), once nothing of the request can still arrive: at once after a
// reply, after its settlement (settle.lua) when no reply will come. A
// waiter it queued is withdrawn.
func (m *Mutex) resolveLate(p *scripts.Pending, a lockArgs, at attempt, px time.Duration) {
	gen := m.c.reg.MarkUnknown(holdID{Key: m.key, Field: a.FieldID()})
	p.Then(func(cmd *redis.Cmd) {
		if replied(cmd.Err()) {
			m.settleLater(a, nil, px, gen)
		} else {
			m.settleLater(a, &at, px, gen)
		}
		if at.waiting {
			m.leave(context.Background(), a)
		}
	})
}

// replied reports whether a call that failed with err (or succeeded) had
// its outcome decided in Redis: it has a reply, or it provably never left.
func replied(err error) bool {
	return err == nil || scripts.IsReply(err) || scripts.NotSent(err)
}
