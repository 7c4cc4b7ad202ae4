package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime"
)

func Example() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	c, err := runtime.NewClient(rdb, nil)
	if err != nil {
		panic(err)
	}
	defer c.Close()

	orders := c.Mutex("order:42", runtime.LockOptions{Name: "OrderLock", WaitTime: 3 * time.Second})
	err = orders.Do(context.Background(), func(ctx context.Context) error {
		// Only one process at a time gets here for order 42.
		// ctx is cancelled with ErrLockLost if the lock is lost meanwhile.
		return nil
	})
	if errors.Is(err, runtime.ErrNotAcquired) {
		fmt.Println("order 42 is busy")
	}
}

func ExampleMutex_Lock() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	c, _ := runtime.NewClient(rdb, nil)
	defer c.Close()
	m := c.Mutex("inventory:sku-1", runtime.LockOptions{})

	held, err := m.Lock(context.Background())
	if err != nil {
		return
	}
	defer m.Unlock(held) // runs even if held is cancelled: releases never leak

	// Re-entering with the hold's ctx counts up instead of deadlocking.
	inner, _ := m.Lock(held)
	n, _ := m.HoldCount(inner)
	fmt.Println("holds:", n)
	_ = m.Unlock(inner)
}

func ExampleMutex_TryLock() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	c, _ := runtime.NewClient(rdb, nil)
	defer c.Close()

	// Wait up to 100ms; hold for a fixed 10s lease that is never renewed.
	held, err := c.Mutex("report:daily", runtime.LockOptions{}).TryLock(context.Background(), 100*time.Millisecond, 10*time.Second)
	if err != nil {
		return
	}
	<-held.Done() // shortly before the 10s run out
	fmt.Println(context.Cause(held))
}
