package main

import (
	"context"
	"errors"
	"math"
	"os/exec"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	lockrt "github.com/lockgen/lockgen/runtime"
)

// A locker is the one thing every scenario needs from a library: wait for
// the lock on key (until ctx is done) and hand back how to release it.
// Adding a library or a lock kind is one small type implementing it.
type locker interface {
	acquire(ctx context.Context, key string) (release func() error, err error)
}

// A lib is one row of every table: a library (or lock kind) at one setting,
// built on its own go-redis client so its commands can be counted apart.
type lib struct {
	Name     string // row label, e.g. "redsync (tuned)"
	Library  string // module path
	Version  string
	Settings string
	Peer     bool // a peer library (ratios are taken against the best peer)
	Kind     string
	open     func(rdb redis.UniversalClient, cnt *counter, giveups *atomic.Int64) (locker, func())
}

// peerLease is the lock expiry given to the peers: redsync's default (8s);
// bsm/redislock has no default, so it gets the same.
const peerLease = 8 * time.Second

func libraries(lockgenVersion, redisVersion string) []*lib {
	rs, bsm := moduleVersion("github.com/go-redsync/redsync/v4"), moduleVersion("github.com/bsm/redislock")
	libs := []*lib{
		{
			Name: "lockgen", Library: "github.com/lockgen/lockgen/runtime", Version: lockgenVersion, Kind: "mutex",
			Settings: "Mutex, watchdog lease (30s), WaitTime Forever; a release hands the lock to a waiter of its own process in the release script when no other process listens, else grants it to the longest lockgen waiter of any process (only that process is told), else (a non-lockgen listener) publishes Redisson's unlock message",
			open: func(rdb redis.UniversalClient, _ *counter, _ *atomic.Int64) (locker, func()) {
				c, err := lockrt.NewClient(rdb, nil)
				must(err)
				return lockgenMutex{c}, func() { _ = c.Close() }
			},
		},
		{
			Name: "redsync (default)", Library: "github.com/go-redsync/redsync/v4", Version: rs, Peer: true, Kind: "mutex",
			Settings: "defaults: expiry 8s, 32 tries, retry delay rand(50ms,250ms); worker re-calls Lock after ErrFailed",
			open: func(rdb redis.UniversalClient, _ *counter, g *atomic.Int64) (locker, func()) {
				return &redsyncLocker{rs: redsync.New(goredis.NewPool(rdb)), giveups: g}, func() {}
			},
		},
		{
			Name: "redsync (tuned)", Library: "github.com/go-redsync/redsync/v4", Version: rs, Peer: true, Kind: "mutex",
			Settings: "expiry 8s, WithRetryDelay(1ms), WithTries(MaxInt32)",
			open: func(rdb redis.UniversalClient, _ *counter, g *atomic.Int64) (locker, func()) {
				return &redsyncLocker{rs: redsync.New(goredis.NewPool(rdb)), giveups: g,
					opts: []redsync.Option{redsync.WithRetryDelay(time.Millisecond), redsync.WithTries(math.MaxInt32)}}, func() {}
			},
		},
		{
			Name: "bsm/redislock (default)", Library: "github.com/bsm/redislock", Version: bsm, Peer: true, Kind: "mutex",
			Settings: "ttl 8s, LimitRetry(LinearBackoff(100ms), 3) as in its Obtain retry example (package default: NoRetry); worker re-calls Obtain after ErrNotObtained",
			open: func(rdb redis.UniversalClient, _ *counter, g *atomic.Int64) (locker, func()) {
				return &bsmLocker{c: redislock.New(rdb), giveups: g, retry: func() redislock.RetryStrategy {
					return redislock.LimitRetry(redislock.LinearBackoff(100*time.Millisecond), 3)
				}}, func() {}
			},
		},
		{
			Name: "bsm/redislock (tuned)", Library: "github.com/bsm/redislock", Version: bsm, Peer: true, Kind: "mutex",
			Settings: "ttl 8s, LinearBackoff(1ms), no retry limit (Obtain bounded by ttl, then re-called)",
			open: func(rdb redis.UniversalClient, _ *counter, g *atomic.Int64) (locker, func()) {
				return &bsmLocker{c: redislock.New(rdb), giveups: g, retry: func() redislock.RetryStrategy {
					return redislock.LinearBackoff(time.Millisecond)
				}}, func() {}
			},
		},
	}
	libs = append(libs, rueidisLibs(redisVersion)...)
	return append(libs, extraKinds(lockgenVersion)...)
}

type lockgenMutex struct{ c *lockrt.Client }

func (l lockgenMutex) acquire(ctx context.Context, key string) (func() error, error) {
	// A Mutex per acquisition, as generated code builds one per call.
	m := l.c.Mutex(key, lockrt.LockOptions{Name: "bench", WaitTime: lockrt.Forever})
	h, err := m.Lock(ctx)
	if err != nil {
		return nil, err
	}
	return func() error { return m.Unlock(h) }, nil
}

type redsyncLocker struct {
	rs      *redsync.Redsync
	opts    []redsync.Option
	giveups *atomic.Int64
}

func (l *redsyncLocker) acquire(ctx context.Context, key string) (func() error, error) {
	m := l.rs.NewMutex(key, l.opts...)
	for {
		err := m.LockContext(ctx)
		if err == nil {
			return func() error {
				_, err := m.UnlockContext(context.Background())
				return err
			}, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var taken *redsync.ErrTaken
		if !errors.Is(err, redsync.ErrFailed) && !errors.As(err, &taken) {
			return nil, err
		}
		l.giveups.Add(1) // tries exhausted: a waiting worker calls Lock again
	}
}

type bsmLocker struct {
	c       *redislock.Client
	retry   func() redislock.RetryStrategy // LimitRetry is stateful: one per Obtain
	giveups *atomic.Int64
}

func (l *bsmLocker) acquire(ctx context.Context, key string) (func() error, error) {
	for {
		lk, err := l.c.Obtain(ctx, key, peerLease, &redislock.Options{RetryStrategy: l.retry()})
		if err == nil {
			return func() error { return lk.Release(context.Background()) }, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		// ErrNotObtained (retries used up) or DeadlineExceeded (Obtain's
		// own deadline, the ttl, when ctx has none): wait on.
		if !errors.Is(err, redislock.ErrNotObtained) && !errors.Is(err, context.DeadlineExceeded) {
			return nil, err
		}
		l.giveups.Add(1)
	}
}

// counter is a go-redis hook counting the top-level commands a client
// sends (what crosses the network), as opposed to INFO commandstats, which
// also counts the commands Lua scripts run inside Redis.
type counter struct {
	calls  atomic.Int64
	byName sync.Map // string -> *atomic.Int64
}

func (c *counter) add(name string) {
	c.calls.Add(1)
	v, ok := c.byName.Load(name)
	if !ok {
		v, _ = c.byName.LoadOrStore(name, new(atomic.Int64))
	}
	v.(*atomic.Int64).Add(1)
}

func (c *counter) snapshot() cmdStats {
	s := make(cmdStats)
	c.byName.Range(func(k, v any) bool {
		s[k.(string)] = v.(*atomic.Int64).Load()
		return true
	})
	return s
}

func (c *counter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.add(strings.ToLower(cmd.Name()))
		return next(ctx, cmd)
	}
}

func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			c.add(strings.ToLower(cmd.Name()))
		}
		return next(ctx, cmds)
	}
}

// newClient is a go-redis client at its defaults with a command counter.
func newClient(addr string) (*redis.Client, *counter) {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	cnt := &counter{}
	rdb.AddHook(cnt)
	return rdb, cnt
}

func moduleVersion(path string) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "?"
	}
	for _, d := range bi.Deps {
		if d.Path == path {
			if d.Replace != nil && d.Replace.Version != "" {
				return d.Replace.Version
			}
			return d.Version
		}
	}
	return "?"
}

// lockgenVersion names the commit of the checkout bench/ replaces lockgen
// with (bench/go.mod: replace => ../).
func lockgenVersion() string {
	out, err := exec.Command("git", "-C", "..", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "local checkout"
	}
	v := "git " + strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "-C", "..", "status", "--porcelain", "--", "runtime", "lua", ":!*_test.go").Output(); err == nil && len(st) > 0 {
		v += " + uncommitted runtime/lua changes"
	}
	return v
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}
