package gen_test

import (
	"context"
	"fmt"

	"github.com/lockgen/lockgen/runtime"
)

// To get a value back from a hold, pass the Do of the lock's handle to
// runtime.Value: it holds the lock as WithOrderLock does and returns what
// fn returns, with no variable outside the closure.
func Example_value() {
	locks, done := newLocks()
	defer done()

	totals := map[int64]int{42: 120}
	refund := func(ctx context.Context, orderID int64, amount int) (int, error) {
		return runtime.Value(ctx, locks.OrderLock(orderID).Do, func(ctx context.Context) (int, error) {
			totals[orderID] -= amount
			return totals[orderID], nil
		})
	}
	left, err := refund(context.Background(), 42, 20)
	fmt.Println("left:", left, "err:", err)

	// A read-write lock's side, and a fenced lock, work the same way.
	token, err := runtime.Value(context.Background(), locks.LedgerLock(7).Do, func(ctx context.Context) (int64, error) {
		fence, _ := runtime.Fence(ctx)
		return fence, nil
	})
	fmt.Println("token:", token, "err:", err)
	pages, err := runtime.Value(context.Background(), locks.Catalog("shop-1").Read().Do, func(ctx context.Context) ([]string, error) {
		return []string{"home", "sale"}, nil
	})
	fmt.Println("pages:", pages, "err:", err)
	// Output:
	// left: 100 err: <nil>
	// token: 1 err: <nil>
	// pages: [home sale] err: <nil>
}
