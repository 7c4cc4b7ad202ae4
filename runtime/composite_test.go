package runtime_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/runtime"
)

// composite is a multi-lock or a RedLock: the handles that are not a Mutex.
type composite interface {
	Lock(ctx context.Context) (context.Context, error)
	TryLock(ctx context.Context, wait, lease time.Duration) (context.Context, error)
	Unlock(ctx context.Context) error
}

// compositeEnv makes one kind of composite lock and says whether it is
// held anywhere.
type compositeEnv struct {
	lock   func(c *runtime.Client) composite
	client func(t *testing.T, opts runtime.Options) *runtime.Client
	held   func() bool
	env    []string // for child processes
}

func compositeKinds(t *testing.T) map[string]func(t *testing.T) *compositeEnv {
	return map[string]func(t *testing.T) *compositeEnv{
		"multi": func(t *testing.T) *compositeEnv {
			s := redistest.Start(t)
			rdb := s.Client(t)
			return &compositeEnv{
				lock: newMultiForTest,
				client: func(t *testing.T, opts runtime.Options) *runtime.Client {
					return newClient(t, s.Client(t), &opts)
				},
				held: func() bool { return rdb.Exists(context.Background(), "cmp:a", "cmp:b").Val() > 0 },
				env:  []string{"LOCKGEN_ADDR=" + s.Addr()},
			}
		},
		"red": func(t *testing.T) *compositeEnv {
			servers := redistest.StartN(t, 3)
			var addrs []string
			for _, s := range servers {
				addrs = append(addrs, s.Addr())
			}
			return &compositeEnv{
				lock: func(c *runtime.Client) composite { return c.RedLock("cmp", runtime.LockOptions{}) },
				client: func(t *testing.T, opts runtime.Options) *runtime.Client {
					for _, s := range servers {
						opts.RedLockNodes = append(opts.RedLockNodes, s.Client(t))
					}
					return newClient(t, servers[0].Client(t), &opts)
				},
				held: func() bool {
					for _, s := range servers {
						if s.Client(t).Exists(context.Background(), "cmp").Val() > 0 {
							return true
						}
					}
					return false
				},
				env: []string{"LOCKGEN_ADDR=" + servers[0].Addr(), "LOCKGEN_ADDRS=" + strings.Join(addrs, ",")},
			}
		},
	}
}

func newMultiForTest(c *runtime.Client) composite {
	return c.MultiLock(runtime.LockOptions{}, c.Mutex("cmp:a", runtime.LockOptions{}), c.Mutex("cmp:b", runtime.LockOptions{}))
}

// newCompositeInChild is newMultiForTest or a RedLock over LOCKGEN_ADDRS,
// for the child role "holder".
func newCompositeInChild(rdb *redis.Client, opts *runtime.Options, kind string) (func(*runtime.Client) composite, bool) {
	switch kind {
	case "multi":
		return newMultiForTest, true
	case "red":
		for _, a := range strings.Split(os.Getenv("LOCKGEN_ADDRS"), ",") {
			opts.RedLockNodes = append(opts.RedLockNodes, redis.NewClient(&redis.Options{Addr: a}))
		}
		return func(c *runtime.Client) composite { return c.RedLock("cmp", runtime.LockOptions{}) }, true
	}
	return nil, false
}

func forEachComposite(t *testing.T, f func(t *testing.T, e *compositeEnv)) {
	for name, mk := range compositeKinds(t) {
		t.Run(name, func(t *testing.T) { f(t, mk(t)) })
	}
}

func TestCompositeLocksReenter(t *testing.T) {
	forEachComposite(t, func(t *testing.T, e *compositeEnv) {
		c := e.client(t, runtime.Options{})
		ctx := ctxT(t)
		l := e.lock(c)
		outer, err := l.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		inner, err := l.TryLock(outer, 0, runtime.Watchdog)
		if err != nil {
			t.Fatalf("re-entry: %v", err)
		}
		if _, err := l.TryLock(ctx, 0, runtime.Watchdog); err == nil {
			t.Fatal("another owner got in")
		}
		if err := l.Unlock(inner); err != nil {
			t.Fatal(err)
		}
		if !e.held() {
			t.Fatal("released after the inner release")
		}
		if err := l.Unlock(outer); err != nil {
			t.Fatal(err)
		}
		if e.held() {
			t.Fatal("still held after the outer release")
		}
	})
}

func TestCompositeLocksRefuseUnlockByNonOwner(t *testing.T) {
	forEachComposite(t, func(t *testing.T, e *compositeEnv) {
		c := e.client(t, runtime.Options{})
		ctx := ctxT(t)
		l := e.lock(c)
		h, _ := l.Lock(ctx)
		if err := l.Unlock(ctx); !errors.Is(err, runtime.ErrNotHeld) {
			t.Fatalf("non-owner Unlock: %v, want ErrNotHeld", err)
		}
		if !e.held() {
			t.Fatal("a non-owner released it")
		}
		_ = l.Unlock(h)
		if err := l.Unlock(h); !errors.Is(err, runtime.ErrNotHeld) {
			t.Fatalf("second Unlock: %v, want ErrNotHeld", err)
		}
	})
}

func TestCompositeWaiterCancelledLeavesNothing(t *testing.T) {
	forEachComposite(t, func(t *testing.T, e *compositeEnv) {
		c := e.client(t, runtime.Options{})
		ctx := ctxT(t)
		l := e.lock(c)
		h, _ := l.Lock(ctx)
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			_, err := l.Lock(wctx)
			done <- err
		}()
		time.Sleep(100 * time.Millisecond)
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v, want context.Canceled", err)
			}
		case <-time.After(2 * time.Second):
			t.Fatal("cancelled waiter did not return")
		}
		_ = l.Unlock(h)
		if e.held() {
			t.Fatal("lock left behind")
		}
	})
}

func TestCompositeCrashedHolderIsReplacedAfterItsLease(t *testing.T) {
	skipShortOutsideCI(t)
	const timeout = time.Second
	for name, mk := range compositeKinds(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel() // servers and a child of its own; mostly waiting out leases
			e := mk(t)
			c := e.client(t, runtime.Options{WatchdogTimeout: timeout})
			cmd, out := startChild(t, "holder", append(e.env, "LOCKGEN_KIND="+name, "LOCKGEN_WATCHDOG_MS=1000", "LOCKGEN_KEY=cmp")...)
			if line, err := out.ReadString('\n'); err != nil || strings.TrimSpace(line) != "held" {
				t.Fatalf("child: %q %v", line, err)
			}
			time.Sleep(1500 * time.Millisecond) // renewed past one lease
			l := e.lock(c)
			if _, err := l.TryLock(ctxT(t), 0, runtime.Watchdog); err == nil {
				t.Fatal("acquired while the child renews")
			}
			_ = cmd.Process.Kill()
			killed := time.Now()
			h, err := l.TryLock(ctxT(t), 5*time.Second, runtime.Watchdog)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Unlock(h)
			if d := time.Since(killed); d > timeout+500*time.Millisecond {
				t.Fatalf("acquired %v after the kill, want <= lease + 500ms", d)
			}
		})
	}
}
