package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"
)

// rueidislock is the strongest Go peer: like lockgen it cancels a ctx when
// the lock is lost, renews on its own and wakes waiters without polling
// (client-side-caching invalidations of the lock keys). It brings its own
// client (rueidis), so its rows do not run on the row's go-redis client;
// only that client's address is used, and a wrapper counts what it sends.

// rueidisLibs are the two rueidislock rows: its defaults (a lock is a
// majority of 3 keys) and KeyMajority 1, which its README asks for with
// one Redis. NoLoopTracking is on in both when Redis can take it.
func rueidisLibs(redisVersion string) []*lib {
	v := moduleVersion("github.com/redis/rueidis")
	noLoop := atLeast(redisVersion, 7, 0, 5)
	loop := "NoLoopTracking on (Redis ≥ 7.0.5)"
	if !noLoop {
		loop = fmt.Sprintf("NoLoopTracking off (Redis %s < 7.0.5)", redisVersion)
	}
	row := func(name string, majority int32, what string) *lib {
		return &lib{
			Name: name, Library: "github.com/redis/rueidis/rueidislock", Version: v, Peer: true, Kind: "mutex",
			Settings: fmt.Sprintf("%s; %s; otherwise defaults: KeyValidity 5s, ExtendInterval 2.5s, TryNextAfter 20ms; "+
				"rueidis client defaults; the lock ctx is kept alive until release", what, loop),
			open: func(rdb redis.UniversalClient, cnt *counter, _ *atomic.Int64) (locker, func()) {
				lk, err := newRueidisLocker(addrsOf(rdb), cnt, rueidislock.LockerOption{KeyMajority: majority, NoLoopTracking: noLoop})
				must(err)
				return rueidisLocker{lk}, lk.Close
			},
		}
	}
	return []*lib{
		row("rueidislock (3 keys)", 0, "defaults: KeyMajority 2 (a majority of 3 keys)"),
		row("rueidislock (1 key)", 1, "KeyMajority 1 (one key, as its README advises for a single Redis)"),
	}
}

// newRueidisLocker builds rueidislock on a rueidis client of the given
// addresses: rueidis asks the first it reaches whether it is a cluster
// node and, if so, builds its cluster client from CLUSTER SLOTS.
func newRueidisLocker(addrs []string, cnt *counter, opt rueidislock.LockerOption) (rueidislock.Locker, error) {
	opt.ClientOption = rueidis.ClientOption{InitAddress: addrs}
	opt.ClientBuilder = func(o rueidis.ClientOption) (rueidis.Client, error) {
		c, err := rueidis.NewClient(o)
		if err != nil {
			return nil, err
		}
		return countingClient{Client: c, cnt: cnt}, nil
	}
	return rueidislock.NewLocker(opt)
}

type rueidisLocker struct{ l rueidislock.Locker }

// acquire waits with ctx, but the lock is taken with a ctx of its own: a
// rueidislock hold ends when the ctx it was taken with ends, and the
// worker's ctx ends with the window, possibly mid-hold. Release cancels
// it and waits for the keys to be deleted.
func (r rueidisLocker) acquire(ctx context.Context, key string) (func() error, error) {
	own, cancelOwn := context.WithCancel(context.Background())
	stop := context.AfterFunc(ctx, cancelOwn) // stop waiting when ctx ends
	held, release, err := r.l.WithContext(own, key)
	if !stop() { // ctx ended while waiting: give back whatever was taken
		if err == nil {
			release()
		}
		cancelOwn()
		return nil, ctx.Err()
	}
	if err != nil {
		cancelOwn()
		return nil, err
	}
	return func() error {
		lost := held.Err() // done before release: the lock was lost mid-hold
		release()
		cancelOwn()
		if lost != nil {
			return fmt.Errorf("rueidislock: lock %s lost before release: %w", key, context.Cause(held))
		}
		return nil
	}, nil
}

// countingClient counts the commands rueidis sends, like the go-redis hook
// does for the other rows (rueidislock's scripts go through Do).
type countingClient struct {
	rueidis.Client
	cnt *counter
}

func (c countingClient) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	c.count(cmd)
	return c.Client.Do(ctx, cmd)
}

func (c countingClient) DoMulti(ctx context.Context, multi ...rueidis.Completed) []rueidis.RedisResult {
	for _, cmd := range multi {
		c.count(cmd)
	}
	return c.Client.DoMulti(ctx, multi...)
}

func (c countingClient) count(cmd rueidis.Completed) {
	if cs := cmd.Commands(); len(cs) > 0 {
		c.cnt.add(strings.ToLower(cs[0]))
	}
}

// atLeast reports whether a Redis version string is at least maj.min.patch.
func atLeast(version string, maj, min, patch int) bool {
	var v [3]int
	for i, s := range strings.SplitN(version, ".", 3) {
		v[i], _ = strconv.Atoi(s)
	}
	want := [3]int{maj, min, patch}
	for i := range v {
		if v[i] != want[i] {
			return v[i] > want[i]
		}
	}
	return true
}

// rueidisKeeper holds the watchdog scenario's locks with rueidislock's own
// renewal (a goroutine per lock key extending every ExtendInterval).
type rueidisKeeper struct {
	l        rueidislock.Locker
	mu       sync.Mutex
	releases []func() error
	held     []context.Context
}

func openRueidisKeeper(lease time.Duration, noLoop bool) func(*redis.Client, *counter, *watchRun) keeper {
	return func(rdb *redis.Client, cnt *counter, _ *watchRun) keeper {
		l, err := newRueidisLocker([]string{rdb.Options().Addr}, cnt, rueidislock.LockerOption{
			KeyMajority: 1, NoLoopTracking: noLoop, KeyValidity: lease, ExtendInterval: lease / 3})
		must(err)
		return &rueidisKeeper{l: l}
	}
}

func (k *rueidisKeeper) take(ctx context.Context, key string) error {
	held, release, err := k.l.TryWithContext(context.Background(), key)
	if err != nil {
		return err
	}
	k.mu.Lock()
	k.releases = append(k.releases, func() error { release(); return nil })
	k.held = append(k.held, held)
	k.mu.Unlock()
	return nil
}

func (k *rueidisKeeper) lost() int {
	n := 0
	for _, h := range k.held {
		if h.Err() != nil {
			n++
		}
	}
	return n
}

func (k *rueidisKeeper) releaseAll() {
	parallel(k.releases)
	k.l.Close()
}

// redisKey is where rueidislock keeps the (only, KeyMajority 1) key of lock name.
func (k *rueidisKeeper) redisKey(name string) string { return "rueidislock:0:" + name }
