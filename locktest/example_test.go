package locktest_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockgen/lockgen/example/gen"
	"github.com/lockgen/lockgen/locktest"
	"github.com/lockgen/lockgen/runtime"
)

// The examples have no *testing.T, so each makes a stand-in with newT
// (tb_test.go) and ends it; a test passes its own t instead.

// A test builds the generated locks on locktest.Client and calls the code
// under test with them; the Client is closed when the test ends.
func ExampleClient() {
	t := newT() // in a test: its t
	defer t.end()

	shop := gen.New(locktest.Client(t, nil))
	err := shop.WithOrderLock(context.Background(), 42, func(ctx context.Context) error {
		locked, _ := shop.OrderLock(42).IsLocked(ctx)
		fmt.Println("order 42 locked:", locked)
		return nil
	})
	fmt.Println("err:", err)
	// Output:
	// order 42 locked: true
	// err: <nil>
}

// Two Clients of one Server play two processes that lock the same things.
func ExampleNewServer() {
	t := newT() // in a test: its t
	defer t.end()

	srv := locktest.NewServer(t)
	api, worker := gen.New(srv.Client(nil)), gen.New(srv.Client(nil))
	_ = api.WithOrderLock(context.Background(), 42, func(ctx context.Context) error {
		//lockgen:ignore a fresh ctx on purpose: it plays another process
		_, err := worker.OrderLock(42).TryLock(context.Background(), 0, runtime.Watchdog)
		fmt.Println("the worker finds order 42 locked:", errors.Is(err, runtime.ErrNotAcquired))
		return nil
	})
	// Output:
	// the worker finds order 42 locked: true
}

// Deleting a lock's key, as a FLUSHALL or a failover without the key
// would, makes its holder lose it: a test of what the code under test does
// then. A short WatchdogTimeout lets the watchdog notice within a second.
func ExampleServer_Redis() {
	t := newT() // in a test: its t
	defer t.end()

	srv := locktest.NewServer(t)
	shop := gen.New(srv.Client(&runtime.Options{WatchdogTimeout: 300 * time.Millisecond}))
	err := shop.WithOrderLock(context.Background(), 42, func(ctx context.Context) error {
		srv.Redis().Del(ctx, shop.OrderLock(42).Key())
		<-ctx.Done() // where the code under test stops its work
		return context.Cause(ctx)
	})
	fmt.Println("lost:", errors.Is(err, runtime.ErrLockLost))
	// Output:
	// lost: true
}
