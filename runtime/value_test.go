package runtime_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime"
)

func TestValueReturnsFnsValueComputedWhileHoldingTheLock(t *testing.T) {
	c, done := exampleClient(nil)
	defer done()
	ctx := context.Background()
	m := c.Mutex("order:1", runtime.LockOptions{Name: "OrderLock"})
	n, err := runtime.Value(ctx, m.Do, func(ctx context.Context) (int, error) {
		return m.HoldCount(ctx)
	})
	if n != 1 || err != nil {
		t.Fatalf("Value = %d, %v; want the hold count 1 seen inside fn, nil", n, err)
	}
	if locked, _ := m.IsLocked(ctx); locked {
		t.Fatal("the lock is still held after Value returned")
	}
}

// TestValueWorksWithTheDoOfEveryHandle passes the Do of every handle that
// has one, and a closure of Do's shape, to Value.
func TestValueWorksWithTheDoOfEveryHandle(t *testing.T) {
	var nodes []redis.UniversalClient
	for range 3 {
		mr := miniredis.RunT(t)
		rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		t.Cleanup(func() { rdb.Close() })
		nodes = append(nodes, rdb)
	}
	c, done := exampleClient(&runtime.Options{RedLockNodes: nodes})
	defer done()
	opts := runtime.LockOptions{WaitTime: time.Second}
	fenced := c.FencedLock("ledger:1", opts)
	handles := []struct {
		name string
		do   func(context.Context, func(context.Context) error) error
	}{
		{"Mutex", c.Mutex("order:1", opts).Do},
		{"fair Mutex", c.FairLock("inventory:1", opts).Do},
		{"RWLock read", c.ReadWrite("catalog:1", opts).Read().Do},
		{"RWLock write", c.ReadWrite("catalog:2", opts).Write().Do},
		{"FencedLock", fenced.Do},
		{"MultiLock", c.MultiLock(opts, c.Mutex("order:2", opts), c.Mutex("order:3", opts)).Do},
		{"RedLock", c.RedLock("payment:1", opts).Do},
		{"Semaphore", c.Semaphore("slots:1", runtime.SemaphoreOptions{Permits: 2, WaitTime: time.Second}).Do},
		{"a closure", func(ctx context.Context, fn func(context.Context) error) error {
			return c.Mutex("order:4", opts).Do(ctx, fn)
		}},
		{"DoFenced's fn", func(ctx context.Context, fn func(context.Context) error) error {
			return fenced.DoFenced(ctx, func(ctx context.Context, _ int64) error { return fn(ctx) })
		}},
	}
	for _, h := range handles {
		t.Run(h.name, func(t *testing.T) {
			got, err := runtime.Value(context.Background(), h.do, func(ctx context.Context) (string, error) {
				if ctx.Done() == nil {
					return "", errors.New("fn got a ctx that is never cancelled: not a hold's")
				}
				return "ok", nil
			})
			if got != "ok" || err != nil {
				t.Fatalf("Value = %q, %v", got, err)
			}
		})
	}
	token, err := runtime.Value(context.Background(), fenced.Do, func(ctx context.Context) (int64, error) {
		fence, ok := runtime.Fence(ctx)
		if !ok {
			return 0, errors.New("no fencing token in the hold's ctx")
		}
		return fence, nil
	})
	if token < 1 || err != nil {
		t.Fatalf("fenced Value = %d, %v; want the acquisition's token", token, err)
	}
}

func TestValueIsTheZeroValueWhenTheLockIsNotAcquired(t *testing.T) {
	c, done := exampleClient(nil)
	defer done()
	ctx := context.Background()
	m := c.Mutex("order:1", runtime.LockOptions{}) // WaitTime 0: one try
	held, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Unlock(held)
	ran := false
	n, err := runtime.Value(context.Background(), m.Do, func(context.Context) (int, error) {
		ran = true
		return 7, nil
	})
	if n != 0 || !errors.Is(err, runtime.ErrNotAcquired) || ran {
		t.Fatalf("Value = %d, %v (fn ran: %v); want 0, ErrNotAcquired, fn not run", n, err, ran)
	}
}

// TestValueKeepsFnsValueWhenTheLockIsLost: the value comes back with the
// error, for the caller to judge.
func TestValueKeepsFnsValueWhenTheLockIsLost(t *testing.T) {
	c, done := exampleClient(nil)
	defer done()
	m := c.Mutex("order:1", runtime.LockOptions{Lease: 100 * time.Millisecond})
	n, err := runtime.Value(context.Background(), m.Do, func(ctx context.Context) (int, error) {
		<-ctx.Done() // just before the fixed lease runs out
		return 7, context.Cause(ctx)
	})
	if n != 7 || !errors.Is(err, runtime.ErrLockLost) {
		t.Fatalf("Value = %d, %v; want 7 and ErrLockLost", n, err)
	}
}

func TestValueReleasesTheLockWhenFnPanics(t *testing.T) {
	c, done := exampleClient(nil)
	defer done()
	m := c.Mutex("order:1", runtime.LockOptions{})
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Fatalf("recovered %v, want fn's panic", r)
			}
		}()
		_, _ = runtime.Value(context.Background(), m.Do, func(context.Context) (int, error) { panic("boom") })
	}()
	if locked, _ := m.IsLocked(context.Background()); locked {
		t.Fatal("the lock is still held after fn panicked")
	}
}

func TestValueRefusesANilDoOrFn(t *testing.T) {
	do := func(ctx context.Context, fn func(context.Context) error) error { return fn(ctx) }
	fn := func(context.Context) (int, error) { return 1, nil }
	if _, err := runtime.Value(context.Background(), nil, fn); !errors.Is(err, runtime.ErrInvalidArgument) {
		t.Errorf("nil do: %v", err)
	}
	if _, err := runtime.Value[int](context.Background(), do, nil); !errors.Is(err, runtime.ErrInvalidArgument) {
		t.Errorf("nil fn: %v", err)
	}
}

// opaqueDo is a Do whose body the compiler cannot see at the call sites
// below, as a handle's Do.
var opaqueDo = func(ctx context.Context, fn func(context.Context) error) error { return fn(ctx) }

// TestValueAllocatesNoMoreThanAVariableOutsideTheClosure: what the doc
// promises, measured without Redis.
func TestValueAllocatesNoMoreThanAVariableOutsideTheClosure(t *testing.T) {
	ctx := context.Background()
	fn := func(context.Context) (int, error) { return 1, nil }
	withValue := testing.AllocsPerRun(100, func() {
		_, _ = runtime.Value(ctx, opaqueDo, fn)
	})
	withVariable := testing.AllocsPerRun(100, func() {
		var n int
		_ = opaqueDo(ctx, func(ctx context.Context) error {
			var err error
			n, err = fn(ctx)
			return err
		})
		_ = n
	})
	t.Logf("allocations per call: Value %v, a variable outside the closure %v", withValue, withVariable)
	if withValue > withVariable {
		t.Fatalf("Value allocates %v per call, a variable outside the closure %v", withValue, withVariable)
	}
}
