package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/lua"
	"github.com/lockgen/lockgen/runtime"
)

// Many goroutines on a few locks, with everything that can meet a local
// hand-off at once: waits that are cancelled or run out, fixed leases and
// watchdog ones, nested owners (which are never handed a lock), replies of
// hand-offs lost after they ran, another client that comes and goes on the
// channels (releases then publish), and the hub's pub/sub connection
// killed. No lock is ever held by two goroutines, none is left held, and
// no goroutine is left running.
func TestLocalHandoffUnderChurnKeepsMutualExclusion(t *testing.T) {
	skipShortOutsideCI(t)
	var lose atomic.Int64
	h := &handoffHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		err := next(ctx, cmd)
		// A granting hand-off ran; its reply is lost. (A lost reply of one
		// that published reads, when resent, as a hold already gone, as a
		// plain last release's does: release.lua.)
		// (The call is a *redis.Cmd, or one wrapped to be sent once.)
		if n, _ := cmd.(interface{ Int64() (int64, error) }).Int64(); err == nil && n == 2 && rand.IntN(10) == 0 {
			lose.Add(1)
			cmd.SetErr(io.ErrUnexpectedEOF)
			return io.ErrUnexpectedEOF
		}
		return err
	}}
	h.on.Store(true)
	s := redistest.Start(t)
	rdb := s.Client(t)
	plain := s.Client(t)
	ctx := ctxT(t)
	lua.Handoff.Load(ctx, plain)
	ignore := goleak.IgnoreCurrent()
	rdb.AddHook(h)
	c := newClient(t, rdb, &runtime.Options{ReleaseTimeout: 300 * time.Millisecond, WatchdogTimeout: 3 * time.Second})

	const (
		keys    = 3
		workers = 12
	)
	locks := make([]*runtime.Mutex, keys)
	channels := make([]string, keys)
	var inUse [keys]atomic.Int32
	for i := range locks {
		name := fmt.Sprintf("churn%d", i)
		locks[i] = c.Mutex(name, runtime.LockOptions{})
		channels[i] = "redisson_lock__channel:{" + name + "}"
	}
	var (
		failures              sync.Map // first error of each kind
		acquired, handedLosts atomic.Int64
	)
	fail := func(what string, err error) {
		if _, loaded := failures.LoadOrStore(what, err); !loaded {
			t.Errorf("%s: %v", what, err)
		}
	}
	enter := func(i int) {
		acquired.Add(1)
		if n := inUse[i].Add(1); n != 1 {
			fail("mutual exclusion", fmt.Errorf("lock %d held by %d goroutines", i, n))
		}
		time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
	}
	unlock := func(i int, hctx context.Context) {
		inUse[i].Add(-1)
		err := locks[i].Unlock(hctx)
		switch {
		case err == nil:
		case errors.Is(err, runtime.ErrOutcomeUnknown):
			handedLosts.Add(1) // every copy's reply lost: the waiter settles it
		default:
			fail("unlock", err)
		}
	}
	// lock takes lock i as a top-level owner, or nested in parent's owner
	// (parent holds a lock with a lower index: no lock-order cycle).
	lock := func(parent context.Context, i int) (hold context.Context, ok bool) {
		lease := runtime.Watchdog
		if rand.IntN(2) == 0 {
			lease = 3 * time.Second
		}
		wctx := parent
		wait := runtime.Forever
		switch rand.IntN(4) {
		case 0:
			// A hold's ctx derives from its wait's: a taken lock keeps
			// the deadline (a nested wait on it then ends at once).
			var cancel context.CancelFunc
			wctx, cancel = context.WithTimeout(parent, time.Duration(rand.IntN(4000))*time.Microsecond)
			defer func() {
				if !ok {
					cancel()
				}
			}()
		case 1:
			wait = time.Duration(rand.IntN(3000)) * time.Microsecond
		}
		hctx, err := locks[i].TryLock(wctx, wait, lease)
		switch {
		case err == nil:
			return hctx, true
		case errors.Is(err, runtime.ErrNotAcquired), errors.Is(err, context.DeadlineExceeded):
		default:
			fail("lock", fmt.Errorf("%w (parent's cause: %v)", err, context.Cause(parent)))
		}
		return nil, false
	}

	stop := time.Now().Add(1500 * time.Millisecond)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				i := rand.IntN(keys)
				outer, ok := lock(ctx, i)
				if !ok {
					continue
				}
				enter(i)
				if j := i + 1 + rand.IntN(keys); j < keys && rand.IntN(3) == 0 {
					if inner, ok := lock(outer, j); ok {
						enter(j)
						unlock(j, inner)
					}
				}
				unlock(i, outer)
			}
		}()
	}
	// Another client comes and goes on the channels; the hub's pub/sub
	// connection is killed now and then.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 0; time.Now().Before(stop); n++ {
			ps := plain.Subscribe(ctx, channels...)
			time.Sleep(time.Duration(20+rand.IntN(60)) * time.Millisecond)
			_ = ps.Close()
			time.Sleep(time.Duration(20+rand.IntN(60)) * time.Millisecond)
			if n%4 == 3 {
				_ = plain.ClientKillByFilter(ctx, "TYPE", "pubsub").Err()
			}
		}
	}()
	wg.Wait()
	t.Logf("%d acquisitions, %d hand-off replies lost, %d releases left unknown", acquired.Load(), lose.Load(), handedLosts.Load())
	eventually(t, 10*time.Second, "every lock free", func() bool { return len(keysLeft(t, plain)) == 0 })
	if acquired.Load() == 0 {
		t.Fatal("no acquisition at all")
	}
	_ = c.Close()
	verifyNoLeak(t, ignore)
}
