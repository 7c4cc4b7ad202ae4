package gen_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/example/gen"
	"github.com/lockgen/lockgen/runtime"
)

// The generated API: New once per runtime client, then With<Name> with
// the lock's typed params. A nested call with the hold's ctx re-enters.
func Example() {
	locks, done := newLocks()
	defer done()

	ctx := context.Background()
	err := locks.WithOrderLock(ctx, 42, func(ctx context.Context) error {
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

// A fair lock is used like a reentrant one; waiters get it in the order
// they asked for it.
func ExampleLocks_WithInventoryLock() {
	locks, done := newLocks()
	defer done()

	err := locks.WithInventoryLock(context.Background(), 1, "sku-7", func(ctx context.Context) error {
		fmt.Println("reserving", locks.InventoryLock(1, "sku-7").Key())
		return nil
	})
	fmt.Println("err:", err)
	// Output:
	// reserving inventory:1:sku-7
	// err: <nil>
}

// Readers share a read-write lock; a reader cannot upgrade to writing.
func ExampleLocks_WithCatalogRead() {
	locks, done := newLocks()
	defer done()

	ctx := context.Background()
	err := locks.WithCatalogRead(ctx, "shop-1", func(ctx context.Context) error {
		// Another reader (a fresh ctx, so another owner) gets in at once.
		//lockgen:ignore a fresh ctx on purpose: it plays another owner
		other := locks.WithCatalogRead(context.Background(), "shop-1", func(context.Context) error {
			fmt.Println("two readers inside")
			return nil
		})
		// Writing from inside a read hold would wait for itself.
		upgrade := locks.WithCatalogWrite(ctx, "shop-1", func(context.Context) error { return nil })
		return errors.Join(other, upgrade)
	})
	fmt.Println("upgrade refused:", errors.Is(err, runtime.ErrUpgrade))
	// Output:
	// two readers inside
	// upgrade refused: true
}

// A multi-lock holds all its members, all or nothing: the order and the
// stock item here. Its params are the members' (orderID, warehouse, sku),
// and the ctx of the hold re-enters each member.
func ExampleLocks_WithCheckoutLock() {
	locks, done := newLocks()
	defer done()

	ctx := context.Background()
	fmt.Println("keys:", locks.CheckoutLock(42, 1, "sku-7").Keys())
	err := locks.WithCheckoutLock(ctx, 42, 1, "sku-7", func(ctx context.Context) error {
		// Someone else's try at a member fails...
		//lockgen:ignore a fresh ctx on purpose: it plays someone else
		_, taken := locks.OrderLock(42).TryLock(context.Background(), 0, runtime.Watchdog)
		fmt.Println("order taken by the checkout:", errors.Is(taken, runtime.ErrNotAcquired))
		// ...while the checkout's own ctx re-enters it.
		return locks.WithOrderLock(ctx, 42, func(ctx context.Context) error {
			held, _ := locks.OrderLock(42).HoldCount(ctx)
			fmt.Println("re-entered the order, count", held)
			return nil
		})
	})
	fmt.Println("err:", err)
	// Output:
	// keys: [inventory:1:sku-7 order:42]
	// order taken by the checkout: true
	// re-entered the order, count 2
	// err: <nil>
}

// A RedLock spans the independent Redis masters given to the client as
// Options.RedLockNodes, and holds while a majority of them grant it: here
// two of three embedded nodes.
func ExampleLocks_WithPaymentLock() {
	var nodes []redis.UniversalClient
	for range 3 {
		mr, err := miniredis.Run()
		if err != nil {
			panic(err)
		}
		defer mr.Close()
		rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		defer rdb.Close()
		nodes = append(nodes, rdb)
	}
	locks, done := newLocksWith(&runtime.Options{RedLockNodes: nodes})
	defer done()

	err := locks.WithPaymentLock(context.Background(), "pay-9", func(ctx context.Context) error {
		granted := 0
		for _, n := range nodes {
			if n.Exists(ctx, locks.PaymentLock("pay-9").Key()).Val() == 1 {
				granted++
			}
		}
		fmt.Println("held on", granted, "of", len(nodes), "nodes")
		// The ctx of the hold re-enters the lock on every node.
		return locks.WithPaymentLock(ctx, "pay-9", func(context.Context) error {
			fmt.Println("re-entered")
			return nil
		})
	})
	fmt.Println("err:", err)
	// Output:
	// held on 3 of 3 nodes
	// re-entered
	// err: <nil>
}

// newLocks returns the generated locks on an embedded Redis (any Redis
// will do; an embedded one keeps the examples self-contained), and a func
// that closes it all.
func newLocks() (*gen.Locks, func()) { return newLocksWith(nil) }

func newLocksWith(opts *runtime.Options) (*gen.Locks, func()) {
	mr, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	client, err := runtime.NewClient(rdb, opts)
	if err != nil {
		panic(err)
	}
	return gen.New(client), func() {
		client.Close()
		rdb.Close()
		mr.Close()
	}
}
