package scripts

import (
	"context"
	"fmt"

	"github.com/lockgen/lockgen/runtime/internal/errs"
	"github.com/redis/go-redis/v9"
)

// A Script is a Lua script with its EVALSHA arguments boxed once (go-redis'
// Script.Run boxes them on each call: most of the allocations per lock).
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

// Runner is what scripts run on: a redis client, a connection of one
// (replica sync needs WAIT on the connection that wrote), or a pipeline.
type Runner interface {
	redis.Scripter
	Process(ctx context.Context, cmd redis.Cmder) error
}

// Run sends EVALSHA with args laid out as [Header slots] [numKeys keys]
// [ARGV...], filling the header itself (package doc: NOSCRIPT recovery).
// Loading first keeps the send proof; only the last-resort EVAL is not
// probed, so its failures count as sent. It returns by ctx's deadline on
// any client: an abandoned call (see Abandoned) keeps args.
func (sc Script) Run(ctx context.Context, rdb Runner, numKeys int, args []any) *redis.Cmd {
	return sc.send(ctx, rdb, numKeys, args, false)
}

// RunOnce is Run without go-redis' resends (package doc; after NOSCRIPT,
// sending again is no resend: the script did not run). A failure without
// a reply wraps errs.OutcomeUnknown: the script may have run, and a copy
// would find its work done. An abandoned call's outcome still comes.
func (sc Script) RunOnce(ctx context.Context, rdb Runner, numKeys int, args []any) *redis.Cmd {
	cmd := sc.send(ctx, rdb, numKeys, args, true)
	if err := cmd.Err(); err != nil && !IsReply(err) && !NotSent(err) {
		cmd.SetErr(fmt.Errorf("%w: %w", errs.OutcomeUnknown, err))
	}
	return cmd
}

// send runs sc (zero: the plain command args) aside on a client that
// would not honour ctx's deadline (see Abandoned), inline otherwise.
func (sc Script) send(ctx context.Context, rdb Runner, numKeys int, args []any, once bool) *redis.Cmd {
	if aside(ctx, rdb) {
		return runAside(ctx, rdb, sc, numKeys, args, once)
	}
	return sc.run(ctx, rdb, numKeys, args, once)
}

func (sc Script) run(ctx context.Context, rdb Runner, numKeys int, args []any, once bool) *redis.Cmd {
	if sc.s == nil { // a plain command (Do)
		cmd := redis.NewCmd(ctx, args...)
		process(ctx, rdb, cmd, once)
		return cmd
	}
	cmd := sc.runScript(ctx, rdb, numKeys, args, once)
	if err := cmd.Err(); err != nil && stoppedPartWay(err) {
		cmd.SetErr(&partialError{err.Error()})
	}
	return cmd
}

func (sc Script) runScript(ctx context.Context, rdb Runner, numKeys int, args []any, once bool) *redis.Cmd {
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

// noScript: redis.HasErrorPrefix allocates even for a nil error.
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
// the call with NOSCRIPT: on a cluster, the master of the call's first
// key (go-redis' ScriptLoad on a ClusterClient re-reads the slot map and
// loads on every node, in the path of each script's first call after a
// failover).
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
