// Package scripts is the runtime's wire to Redis: one Script per Lua file
// of package lua, called with its EVALSHA arguments laid out once, and the
// proof of whether a failed call was ever written (the send probe).
//
// Contract:
//
//   - Script.Run sends EVALSHA, loads the script on NOSCRIPT and sends it
//     again, and falls back to EVAL only if the script is gone again. The
//     first key routes the command on a cluster.
//   - Script.RunOnce does the same for a script that must not run twice
//     for one call (nothing settles it: a plain semaphore's, trySetPermits):
//     go-redis does not resend it after a transport error or a timed-out
//     read, as it does other commands (MaxRetries).
//   - A call that fails without a reply and was provably never written on
//     any attempt returns an error NotSent recognises: it has no outcome
//     to settle. Any other failure without a reply may have reached Redis
//     (IsReply separates replies from transport and ctx errors).
//   - Run, RunOnce and Do return by ctx's deadline on any client: on one
//     that would not honour it on a socket read (no ContextTimeoutEnabled)
//     the call runs aside, and one abandoned at its deadline (or at its
//     call's bound, WithCallBound) still delivers its outcome (Abandoned,
//     Pending.Then); Do sends a plain command the same way.
//   - KeySlot is the cluster slot of a key, as Redis computes it.
//
// The package holds no state beyond its pools (the send probes, the calls
// run aside) and knows nothing of locks, holds or clients: it is the
// bottom layer of the runtime.
package scripts
