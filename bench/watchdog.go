package main

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	lockrt "github.com/lockgen/lockgen/runtime"
)

// watchRun is scenario 4: n locks held for a window, kept alive by the
// library's watchdog (lockgen) or by the refresh loop the peer's docs
// suggest (one goroutine per lock extending every lease/3).
type watchRun struct {
	Name, Version, Settings string
	Locks                   int
	Lease, Window           time.Duration
	Periods                 float64  // renewal periods in the window
	Redis                   cmdStats // INFO commandstats delta over the window
	Client                  cmdStats // top-level commands sent over the window
	Rounds                  []round  // lockgen: what the Observer reported per renewal call (a pipeline of batches)
	ObserverCalls           int64    // lockgen: script calls in the window, as the Observer reported them
	ClientCPU, RedisCPU     time.Duration
	Goroutines              int
	Lost                    int // holds reported lost by the library or missing in Redis
	TakeFailed              int // locks not taken: the library failed 5 times (never held, not counted as lost)
	AcquireTime             time.Duration
}

type round struct {
	Calls, Renewed int
	At             time.Time
}

// scriptCalls is the number of script calls (EVALSHA/EVAL) sent in the
// window. lockgen's watchdog renews through a client of its own (bounded
// by the holds' deadlines), which the row's go-redis hook does not see:
// its Observer counts them instead.
func (w *watchRun) scriptCalls() int64 {
	return max(w.Client["evalsha"]+w.Client["eval"], w.ObserverCalls)
}

func (w *watchRun) callsPerPeriod() float64 { return float64(w.scriptCalls()) / max(w.Periods, 1) }

// keeper holds one library's locks for the watchdog scenario.
type keeper interface {
	take(ctx context.Context, key string) error
	lost() int
	releaseAll()
}

func (b *bench) watchdog(name, version, settings string, n int, lease, window time.Duration,
	open func(rdb *redis.Client, cnt *counter, wr *watchRun) keeper) *watchRun {
	rdb, cnt := newClient(b.srv.addr)
	defer rdb.Close()
	wr := &watchRun{Name: name, Version: version, Settings: settings, Locks: n, Lease: lease, Window: window}
	k := open(rdb, cnt, wr)
	ctx := context.Background()
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("bench:watchdog:%s:%d", name, i)
	}
	// Take the locks with a few goroutines, as a busy service would.
	t0 := time.Now()
	var next, failed atomic.Int64
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				// A take can fail under load (rueidis: context deadline
				// exceeded, seen once at load average 7): try again a few
				// times, then count it instead of ending the run.
				var err error
				for range 5 {
					if err = k.take(ctx, keys[i]); err == nil {
						break
					}
				}
				if err != nil {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	wr.AcquireTime, wr.TakeFailed = time.Since(t0), int(failed.Load())

	runtime.GC()
	cBefore := cnt.snapshot()
	rBefore, err := commandStats(ctx, b.admin)
	must(err)
	cpu0, rcpu0 := processCPU(), redisCPU(ctx, b.admin)
	winStart := time.Now()
	time.Sleep(window / 2)
	wr.Goroutines = runtime.NumGoroutine()
	time.Sleep(window - window/2)
	wr.ClientCPU, wr.RedisCPU = processCPU()-cpu0, redisCPU(ctx, b.admin)-rcpu0
	rAfter, err := commandStats(ctx, b.admin)
	must(err)
	wr.Redis, wr.Client = rAfter.sub(rBefore), cnt.snapshot().sub(cBefore)
	winEnd := time.Now()
	// Renewal periods in the window: renewals per lock. For the peers (a
	// refresh call per lock) and rueidislock (an extend script per lock
	// key), script calls per lock; for lockgen, the holds its Observer
	// saw renewed in the window, per lock.
	wr.Periods = float64(wr.scriptCalls()) / float64(n)
	if len(wr.Rounds) > 0 {
		renewed := 0
		for _, r := range wr.Rounds {
			if r.At.After(winStart) && !r.At.After(winEnd) {
				renewed += r.Renewed
				wr.ObserverCalls += int64(r.Calls)
			}
		}
		wr.Periods = float64(renewed) / float64(n)
	}

	// Lost: reported by the library, or the key is gone from Redis.
	wr.Lost = k.lost()
	pipe := rdb.Pipeline()
	exists := make([]*redis.IntCmd, n)
	for i, key := range keys {
		if rk, ok := k.(interface{ redisKey(string) string }); ok {
			key = rk.redisKey(key) // the library's own key for lock key
		}
		exists[i] = pipe.Exists(ctx, key)
	}
	_, err = pipe.Exec(ctx)
	must(err)
	missing := 0
	for _, e := range exists {
		if e.Val() == 0 {
			missing++
		}
	}
	wr.Lost = max(wr.Lost, missing)
	k.releaseAll()
	return wr
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// lockgen: the Client's one watchdog renews every hold in batched calls.
type lockgenKeeper struct {
	c     *lockrt.Client
	mu    sync.Mutex
	holds []func() error
	ctxs  []context.Context
	lostN atomic.Int64
}

func openLockgenKeeper(lease time.Duration) func(*redis.Client, *counter, *watchRun) keeper {
	return func(rdb *redis.Client, _ *counter, wr *watchRun) keeper {
		k := &lockgenKeeper{}
		var mu sync.Mutex
		c, err := lockrt.NewClient(rdb, &lockrt.Options{
			WatchdogTimeout: lease,
			Observer: lockrt.ObserverFunc(func(e lockrt.Event) {
				switch e.Kind {
				case lockrt.EventRenewed:
					mu.Lock()
					wr.Rounds = append(wr.Rounds, round{Calls: e.Calls, Renewed: e.Renewed, At: time.Now()})
					mu.Unlock()
				case lockrt.EventLost:
					k.lostN.Add(1)
				}
			}),
		})
		must(err)
		k.c = c
		return k
	}
}

func (k *lockgenKeeper) take(ctx context.Context, key string) error {
	m := k.c.Mutex(key, lockrt.LockOptions{Name: "watchdog"})
	h, err := m.TryLock(ctx, 0, lockrt.Watchdog)
	if err != nil {
		return err
	}
	k.mu.Lock()
	k.holds = append(k.holds, func() error { return m.Unlock(h) })
	k.ctxs = append(k.ctxs, h)
	k.mu.Unlock()
	return nil
}

func (k *lockgenKeeper) lost() int {
	n := int(k.lostN.Load())
	cancelled := 0
	for _, h := range k.ctxs {
		if h.Err() != nil {
			cancelled++
		}
	}
	return max(n, cancelled)
}

func (k *lockgenKeeper) releaseAll() {
	parallel(k.holds)
	_ = k.c.Close()
}

// refreshKeeper: the peers' pattern, one goroutine per lock refreshing
// every lease/3 until stopped.
type refreshKeeper struct {
	lease    time.Duration
	obtain   func(ctx context.Context, key string) (refresh func(ctx context.Context) error, release func() error, err error)
	stop     chan struct{}
	wg       sync.WaitGroup
	mu       sync.Mutex
	releases []func() error
	lostN    atomic.Int64
}

func (k *refreshKeeper) take(ctx context.Context, key string) error {
	refresh, release, err := k.obtain(ctx, key)
	if err != nil {
		return err
	}
	k.mu.Lock()
	k.releases = append(k.releases, release)
	k.mu.Unlock()
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		t := time.NewTicker(k.lease / 3)
		defer t.Stop()
		for {
			select {
			case <-k.stop:
				return
			case <-t.C:
				if err := refresh(context.Background()); err != nil {
					k.lostN.Add(1)
					return
				}
			}
		}
	}()
	return nil
}

func (k *refreshKeeper) lost() int { return int(k.lostN.Load()) }

func (k *refreshKeeper) releaseAll() {
	close(k.stop)
	k.wg.Wait()
	parallel(k.releases)
}

func openRedsyncKeeper(lease time.Duration) func(*redis.Client, *counter, *watchRun) keeper {
	return func(rdb *redis.Client, _ *counter, _ *watchRun) keeper {
		rs := redsync.New(goredis.NewPool(rdb))
		return &refreshKeeper{lease: lease, stop: make(chan struct{}),
			obtain: func(ctx context.Context, key string) (func(context.Context) error, func() error, error) {
				m := rs.NewMutex(key, redsync.WithExpiry(lease), redsync.WithTries(1))
				if err := m.LockContext(ctx); err != nil {
					return nil, nil, err
				}
				refresh := func(ctx context.Context) error {
					ok, err := m.ExtendContext(ctx)
					if err == nil && !ok {
						err = redsync.ErrExtendFailed
					}
					return err
				}
				release := func() error { _, err := m.UnlockContext(context.Background()); return err }
				return refresh, release, nil
			}}
	}
}

func openBsmKeeper(lease time.Duration) func(*redis.Client, *counter, *watchRun) keeper {
	return func(rdb *redis.Client, _ *counter, _ *watchRun) keeper {
		c := redislock.New(rdb)
		return &refreshKeeper{lease: lease, stop: make(chan struct{}),
			obtain: func(ctx context.Context, key string) (func(context.Context) error, func() error, error) {
				lk, err := c.Obtain(ctx, key, lease, nil)
				if err != nil {
					return nil, nil, err
				}
				refresh := func(ctx context.Context) error { return lk.Refresh(ctx, lease, nil) }
				release := func() error { return lk.Release(context.Background()) }
				return refresh, release, nil
			}}
	}
}

// parallel runs fns with a few goroutines.
func parallel(fns []func() error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(len(fns)); i = next.Add(1) - 1 {
				_ = fns[i]()
			}
		}()
	}
	wg.Wait()
}
