package runtime_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/lockgen/lockgen/runtime"
)

// Value returns what fn computes under the lock, where Do returns only an
// error: here the stock left after a reservation. It takes the Do of any
// handle; for generated locks, the handle constructor's, such as
// shop.InventoryLock(warehouse, sku).Do.
func ExampleValue() {
	c, done := exampleClient(nil)
	defer done()
	stock := map[string]int{"sku-7": 5}
	m := c.Mutex("inventory:sku-7", runtime.LockOptions{Name: "InventoryLock"})

	reserve := func(ctx context.Context, n int) (int, error) {
		return runtime.Value(ctx, m.Do, func(ctx context.Context) (int, error) {
			if stock["sku-7"] < n {
				return stock["sku-7"], errors.New("not enough stock")
			}
			stock["sku-7"] -= n
			return stock["sku-7"], nil
		})
	}
	left, err := reserve(context.Background(), 2)
	fmt.Println("left:", left, "err:", err)
	left, err = reserve(context.Background(), 4)
	fmt.Println("left:", left, "err:", err)
	// Output:
	// left: 3 err: <nil>
	// left: 3 err: not enough stock
}
