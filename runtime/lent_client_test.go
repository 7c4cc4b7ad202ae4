package runtime_test

import (
	"context"
	"errors"
	"log/slog"
	goruntime "runtime"
	"runtime/debug"
	"sync"
	"testing"
	"time"
	"weak"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/runtime"
)

// The go-redis client a service lends NewClient is in use by the service's
// other goroutines, dialling connections all the time (a 2-connection pool,
// connections that live 5 ms). Lockgen Clients created and closed on it
// concurrently, each taking and renewing a lock, must not touch it in a way
// the race detector reports (AddHook on a client in use races with its
// dials: go-redis reads the hook chain on every new connection).
func TestClientsComeAndGoOnABusyLentClient(t *testing.T) {
	skipShortOutsideCI(t)
	s := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), PoolSize: 2, ConnMaxLifetime: 5 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := ctxT(t)
	stop := make(chan struct{})
	var users sync.WaitGroup
	for range 4 { // the service's own traffic
		users.Add(1)
		go func() {
			defer users.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				_ = rdb.Ping(ctx).Err()
			}
		}()
	}
	var clients sync.WaitGroup
	for g := range 4 {
		clients.Add(1)
		go func() {
			defer clients.Done()
			for i := range 25 {
				// A 900 ms watchdog: at 300 ms a full run beside other
				// work (load 8) lost every Client's first hold to the
				// lease before its Unlock, its try's reply held up in the
				// busy pool of two; what is tested is the lent client.
				c, err := runtime.NewClient(rdb, &runtime.Options{WatchdogTimeout: 900 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					t.Error(err)
					return
				}
				m := c.Mutex("lent:"+string(rune('a'+g)), runtime.LockOptions{})
				sent := time.Now()
				hctx, err := m.TryLock(ctx, 5*time.Second, runtime.Watchdog)
				if err != nil {
					t.Errorf("client %d/%d: %v", g, i, err)
					_ = c.Close()
					return
				}
				time.Sleep(time.Duration(i%3) * 180 * time.Millisecond) // some holds see a renewal (at 300 ms)
				err = m.Unlock(hctx)
				// A hold older than its lease may have run out with its
				// first renewal held up in the busy pool of two (load
				// 10): its Unlock rightly says so. What is tested is
				// the lent client, not renewals on a starved process.
				if ranOut := time.Since(sent) > 900*time.Millisecond; err != nil && !(ranOut && errors.Is(err, runtime.ErrLockLost)) {
					t.Errorf("client %d/%d: unlock: %v", g, i, err)
				}
				_ = c.Close()
			}
		}()
	}
	clients.Wait()
	close(stop)
	users.Wait()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("the lent client after 100 lockgen Clients came and went: %v", err)
	}
}

// Closing a Client leaves nothing of it reachable from the go-redis client
// it was lent: after 1,000 Clients were created, used and closed on one
// go-redis client (which stays open and referenced), the garbage collector
// frees every one of them.
//
// In parallel with the package's other parallel tests: it judges only
// what stays reachable (on a server of its own), never a time, and its
// thousand Clients in a row took 3 s alone and 13 s of the serial part
// of a loaded run.
func TestClosedClientsAreNotKeptAliveByTheLentClient(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	rdb := s.Client(t)
	ctx := ctxT(t)
	const n = 1000
	refs := make([]weak.Pointer[runtime.Client], 0, n)
	for i := range n {
		c, err := runtime.NewClient(rdb, &runtime.Options{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		if i%10 == 0 { // some hold a lock first, which starts the watchdog
			m := c.Mutex("lent:gc", runtime.LockOptions{})
			hctx, err := m.TryLock(ctx, 0, runtime.Watchdog)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Unlock(hctx); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		refs = append(refs, weak.Make(c))
	}
	alive := func() int {
		k := 0
		for _, r := range refs {
			if r.Value() != nil {
				k++
			}
		}
		return k
	}
	// Goroutines of a closed Client that are still on their way out (a
	// pub/sub reader returning from its read) may keep it for a moment.
	deadline := time.Now().Add(5 * time.Second)
	for {
		goruntime.GC()
		debug.FreeOSMemory()
		k := alive()
		if k == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d closed Clients are still reachable", k, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	goruntime.KeepAlive(rdb)
}
