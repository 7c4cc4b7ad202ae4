package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/lockgen/lockgen/runtime"
)

// A fenced lock hands every acquisition a token that grows; a storage that
// refuses tokens older than the newest it has seen is safe even from a
// holder that was paused past its lease.
func ExampleFencedLock() {
	c, done := exampleClient(nil)
	defer done()
	ledger := c.FencedLock("ledger:7", runtime.LockOptions{Name: "LedgerLock"})

	for range 2 {
		_ = ledger.DoFenced(context.Background(), func(ctx context.Context, fence int64) error {
			fmt.Println("posting with token", fence)
			return nil
		})
	}
	held, fence, _ := ledger.LockFenced(context.Background())
	inner, _ := ledger.Lock(held) // a re-entry gets a token of its own
	again, _ := runtime.Fence(inner)
	fmt.Println("outer", fence, "inner", again)
	_ = ledger.Unlock(inner)
	_ = ledger.Unlock(held)
	// Output:
	// posting with token 1
	// posting with token 2
	// outer 3 inner 4
}

// A semaphore admits Permits holders at once; each permit has its own
// lease, so one a crashed holder took comes back.
func ExampleSemaphore() {
	c, done := exampleClient(nil)
	defer done()
	slots := c.Semaphore("payment-slots:shop-1", runtime.SemaphoreOptions{Name: "PaymentSlots", Permits: 2})
	ctx := context.Background()

	a, _ := slots.Acquire(ctx, 1)
	b, _ := slots.Acquire(ctx, 1)
	_, err := slots.TryAcquire(ctx, 1, 0)
	fmt.Println("third holder:", errors.Is(err, runtime.ErrNotAcquired))
	_ = slots.Release(a)
	n, _ := slots.Available(ctx)
	fmt.Println("available:", n)
	_ = slots.Release(b)
	// Output:
	// third holder: true
	// available: 1
}

// A latch is armed once; waiters go on when it has been counted down to
// zero, and a late waiter returns at once.
func ExampleLatch() {
	c, done := exampleClient(nil)
	defer done()
	imported := c.Latch("import:batch-9", runtime.LatchOptions{Name: "ImportDone", Count: 2})
	ctx := context.Background()

	armed, _ := imported.Arm(ctx)
	fmt.Println("armed:", armed)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := imported.Await(ctx); err == nil {
			fmt.Println("report: every shard is in")
		}
	}()
	_ = imported.CountDown(ctx)
	_ = imported.CountDown(ctx)
	wg.Wait()
	fmt.Println("late waiter:", imported.Await(ctx))
	// Output:
	// armed: true
	// report: every shard is in
	// late waiter: <nil>
}
