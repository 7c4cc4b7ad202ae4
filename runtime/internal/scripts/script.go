package scripts

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// A Script is a Lua script with its EVALSHA arguments boxed once. go-redis'
// Script.Run boxes the command name, the SHA and every key on each call;
// for the lock hot path (one call to acquire, one to release) that was
// most of the allocations per lock.
type Script struct {
	s        *redis.Script
	sha, src any // src: its text, for EVAL
}

// New binds s.
func New(s *redis.Script) Script {
	var src srcOf
	s.Eval(context.Background(), &src, nil) // go-redis hands its text to Eval alone
	return Script{s: s, sha: s.Hash(), src: src.text}
}

// srcOf takes the text a redis.Script evaluates, and sends nothing.
type srcOf struct {
	redis.Scripter
	text any
}

func (c *srcOf) Eval(_ context.Context, text string, _ []string, _ ...any) *redis.Cmd {
	c.text = text
	return nil
}

// Header is the number of argument slots Run fills before the keys.
const Header = 3

// Runner is what scripts run on: a Client's redis client, or one
// connection of it (replica sync needs WAIT on the connection that wrote).
type Runner interface {
	redis.Scripter
	Process(ctx context.Context, cmd redis.Cmder) error
}

// Run sends EVALSHA with args laid out as
//
//	[Header slots] [numKeys keys] [ARGV...]
//
// filling the header itself. When the server's script cache has no such
// script (restart, SCRIPT FLUSH) it loads it and sends EVALSHA again, and
// falls back to EVAL only if the script is gone again by then.
//
// Loading first keeps the send proof (see NotSent) after a NOSCRIPT: a
// failed load means the script never ran. Only the last-resort EVAL is not
// probed, so its failures count as sent.
//
// It returns by ctx's deadline on any client: on one that does not honour
// it on a socket read, the call may be abandoned (see Abandoned); args then
// stay with the call, so the caller must not reuse them.
func (sc Script) Run(ctx context.Context, rdb Runner, numKeys int, args []any) *redis.Cmd {
	if aside(ctx, rdb) {
		return runAside(ctx, rdb, sc, numKeys, args, false)
	}
	return sc.run(ctx, rdb, numKeys, args, false)
}

// RunOnce is Run for a script that must not run twice for one call (it
// is not idempotent and nothing settles it): go-redis does not resend it
// after a failed attempt, as it does other commands (MaxRetries) when the
// connection breaks or a read times out after the command was written.
// A failure without a reply is then the outcome of the only copy sent.
// A NOSCRIPT reply is not a failed attempt (the script did not run):
// loading and sending again is not a resend. It returns by ctx's deadline
// as Run does.
func (sc Script) RunOnce(ctx context.Context, rdb Runner, numKeys int, args []any) *redis.Cmd {
	if aside(ctx, rdb) {
		return runAside(ctx, rdb, sc, numKeys, args, true)
	}
	return sc.run(ctx, rdb, numKeys, args, true)
}

func (sc Script) run(ctx context.Context, rdb Runner, numKeys int, args []any, once bool) *redis.Cmd {
	cmd := sc.evalsha(ctx, rdb, numKeys, args, once)
	if !noScript(cmd.Err()) {
		return cmd
	}
	if err := sc.load(ctx, rdb, numKeys, args); err != nil && !IsReply(err) {
		cmd.SetErr(&notSentError{err})
		return cmd
	} else if err == nil {
		cmd = sc.evalsha(ctx, rdb, numKeys, args, once)
		if !noScript(cmd.Err()) {
			return cmd
		}
	}
	cmd = sc.cmd(ctx, "eval", sc.src, numKeys, args)
	process(ctx, rdb, cmd, once)
	return cmd
}

// noScript reports whether err is a NOSCRIPT reply. redis.HasErrorPrefix
// allocates even for a nil error (its errors.As target escapes): two
// allocations on every call that succeeded, without the nil check.
func noScript(err error) bool { return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") }

// onceCmd is a command go-redis sends at most once: its retry loops (the
// client's and the cluster client's) resend a command after a transport
// error only if NoRetry is false.
type onceCmd struct{ *redis.Cmd }

func (onceCmd) NoRetry() bool { return true }

// process sends cmd on rdb; once: without go-redis' retries.
func process(ctx context.Context, rdb Runner, cmd *redis.Cmd, once bool) {
	if once {
		_ = rdb.Process(ctx, onceCmd{cmd})
	} else {
		_ = rdb.Process(ctx, cmd)
	}
}

// load puts the script in the script cache of the server that refused
// the call with NOSCRIPT. On a cluster that is the master of the call's
// first key, as the client routes it now: go-redis' ScriptLoad on a
// ClusterClient re-reads the slot map synchronously and loads the script
// on every node, which after a failover (its promoted replica has no
// scripts cached) puts a CLUSTER SLOTS that may try the dead master first,
// and a load on every node, in the path of each script's first call.
func (sc Script) load(ctx context.Context, rdb Runner, numKeys int, args []any) error {
	if cc, ok := rdb.(*redis.ClusterClient); ok && numKeys > 0 {
		if key, ok := args[Header].(string); ok {
			if node, err := cc.MasterForKey(ctx, key); err == nil {
				return sc.Load(ctx, node)
			}
		}
	}
	return sc.Load(ctx, rdb)
}

// Load puts the script in the server's script cache.
func (sc Script) Load(ctx context.Context, rdb redis.Scripter) error {
	return sc.s.Load(ctx, rdb).Err()
}

// evalsha sends EVALSHA, with the SHA-1 as a send probe; once: without
// go-redis' retries.
func (sc Script) evalsha(ctx context.Context, rdb Runner, numKeys int, args []any, once bool) *redis.Cmd {
	probe := newSendProbe(sc.sha.(string))
	cmd := sc.Cmd(ctx, numKeys, args)
	cmd.Args()[1] = probe
	process(ctx, rdb, cmd, once)
	args[1] = sc.sha
	probe.finish(cmd)
	return cmd
}

// Cmd is the EVALSHA command of args (laid out as for Run) without
// sending it, for a pipeline: the caller handles NOSCRIPT (Load, then
// Eval if loading failed).
func (sc Script) Cmd(ctx context.Context, numKeys int, args []any) *redis.Cmd {
	return sc.cmd(ctx, "evalsha", sc.sha, numKeys, args)
}

func (sc Script) cmd(ctx context.Context, name string, body any, numKeys int, args []any) *redis.Cmd {
	args[0], args[1], args[2] = name, body, numKeys
	cmd := redis.NewCmd(ctx, args...)
	if numKeys > 0 {
		cmd.SetFirstKeyPos(Header)
	}
	return cmd
}

// Eval sends args (laid out as for Run) as a full EVAL on rdb, which may
// be a pipeline. Keys go as they are: a string, or as the watchdog passes
// a hold's, a *string.
func (sc Script) Eval(ctx context.Context, rdb Runner, numKeys int, args []any) *redis.Cmd {
	cmd := sc.cmd(ctx, "eval", sc.src, numKeys, args)
	_ = rdb.Process(ctx, cmd)
	return cmd
}
