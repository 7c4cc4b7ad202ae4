package gen_test

import (
	"context"
	"fmt"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/example/gen"
	"github.com/lockgen/lockgen/runtime"
)

// The generated API: New once per runtime client, then With<Name> with
// the lock's typed params. A nested call with the hold's ctx re-enters.
func Example() {
	mr, _ := miniredis.Run() // any Redis; an embedded one keeps the example self-contained
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	client, err := runtime.NewClient(rdb, nil)
	if err != nil {
		panic(err)
	}
	defer client.Close()
	locks := gen.New(client)

	ctx := context.Background()
	err = locks.WithOrderLock(ctx, 42, func(ctx context.Context) error {
		held, _ := locks.OrderLock(42).HoldCount(ctx)
		fmt.Println("holding", locks.OrderLock(42).Key(), "count", held)
		return locks.WithOrderLock(ctx, 42, func(ctx context.Context) error {
			held, _ := locks.OrderLock(42).HoldCount(ctx)
			fmt.Println("re-entered, count", held)
			return nil
		})
	})
	fmt.Println("err:", err)
	fmt.Println("tenant report key:", locks.TenantReportLock("acme", 5).Key())
	// Output:
	// holding order:42 count 1
	// re-entered, count 2
	// err: <nil>
	// tenant report key: report:{acme}:5
}
