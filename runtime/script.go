package runtime

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// A script is a Lua script with its EVALSHA arguments boxed once. go-redis'
// Script.Run boxes the command name, the SHA and every key on each call;
// for the lock hot path (one call to acquire, one to release) that was
// most of the allocations per lock.
type script struct {
	s   *redis.Script
	sha any
}

func newScript(s *redis.Script) script { return script{s: s, sha: s.Hash()} }

// run sends EVALSHA with args laid out as
//
//	[3 header slots] [numKeys keys] [ARGV...]
//
// filling the header itself. When the server's script cache has no such
// script (restart, SCRIPT FLUSH) it loads it and sends EVALSHA again, and
// falls back to EVAL only if the script is gone again by then. The first
// key routes the command on a cluster.
//
// A call that fails without a reply and was provably never written (see
// sendProbe) returns an error that notSent recognises. Loading first keeps
// that proof after a NOSCRIPT (a failed load means the script never ran);
// only the last-resort EVAL is not probed, so its failures count as sent.
func (sc script) run(ctx context.Context, rdb scripter, numKeys int, args []any) *redis.Cmd {
	cmd := sc.evalsha(ctx, rdb, numKeys, args)
	if err := cmd.Err(); err == nil || !redis.HasErrorPrefix(err, "NOSCRIPT") {
		return cmd
	}
	if err := sc.s.Load(ctx, rdb).Err(); err != nil && !isRedisReply(err) {
		cmd.SetErr(&notSentError{err})
		return cmd
	} else if err == nil {
		cmd = sc.evalsha(ctx, rdb, numKeys, args)
		if err := cmd.Err(); err == nil || !redis.HasErrorPrefix(err, "NOSCRIPT") {
			return cmd
		}
	}
	keys := make([]string, numKeys)
	for i := range keys {
		keys[i] = args[3+i].(string)
	}
	return sc.s.Eval(ctx, rdb, keys, args[3+numKeys:]...)
}

// evalsha sends EVALSHA once, with the SHA-1 as a sendProbe.
func (sc script) evalsha(ctx context.Context, rdb scripter, numKeys int, args []any) *redis.Cmd {
	probe := newSendProbe(sc.sha.(string))
	args[0], args[1], args[2] = "evalsha", probe, numKeys
	cmd := redis.NewCmd(ctx, args...)
	if numKeys > 0 {
		cmd.SetFirstKeyPos(3)
	}
	_ = rdb.Process(ctx, cmd)
	args[1] = sc.sha
	probe.finish(cmd)
	return cmd
}

// scripter is what scripts run on: the Client's redis client, or one
// connection of it (replica sync needs WAIT on the connection that wrote).
type scripter interface {
	redis.Scripter
	Process(ctx context.Context, cmd redis.Cmder) error
}

// lockArgs are the script arguments naming one owner's hold of one key,
// boxed once for all the calls of an acquisition and its release.
type lockArgs struct {
	key   any // lock key
	owner any // owner token
	field any // hash field proving the hold (the owner, or "<owner>:write")
}

func newLockArgs(key, owner, field string) lockArgs {
	a := lockArgs{key: key, owner: owner, field: owner}
	if field != owner {
		a.field = field
	}
	return a
}

func (a lockArgs) ownerID() string { return a.owner.(string) }
func (a lockArgs) fieldID() string { return a.field.(string) }
