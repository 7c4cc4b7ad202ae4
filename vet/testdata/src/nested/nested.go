// Package nested takes two instances of one lock, one inside the other:
// a transfer from a to b that holds a's lock while it takes b's deadlocks
// with one from b to a. Re-entering the instance held is not reported.
package nested

import (
	"context"

	"example.com/vettest/locks"
	"example.com/vettest/nested/ledger"
	"github.com/lockgen/lockgen/runtime"
)

type Bank struct {
	l *locks.Locks
	c *runtime.Client
}

// Transfer nests two instances of a fenced lock directly.
func (b *Bank) Transfer(ctx context.Context, from, to int64) error { // want Transfer:`^acquires locks\.LedgerLock$`
	return b.l.WithLedgerLock(ctx, from, func(hctx context.Context, fence int64) error {
		return b.l.WithLedgerLock(hctx, to, func(context.Context, int64) error { return nil }) // want `^nested instances of one lock: locks.LedgerLock\(to\) is taken while locks.LedgerLock\(from\) is held \(take them in a fixed order\)$`
	})
}

// Move nests two orders' locks, which a multi lock can take together.
func (b *Bank) Move(ctx context.Context, from, to int64) error { // want Move:`^acquires locks\.OrderLock$`
	return b.l.WithOrderLock(ctx, from, func(hctx context.Context) error {
		return b.l.WithOrderLock(hctx, to, func(context.Context) error { return nil }) // want `^nested instances of one lock: locks.OrderLock\(to\) is taken while locks.OrderLock\(from\) is held \(take both in one multi lock, or in a fixed order\)$`
	})
}

// touch takes OrderLock two calls down, for the order it is given.
func (b *Bank) touch(ctx context.Context, id int64) error { return b.touchOrder(ctx, id) }

func (b *Bank) touchOrder(ctx context.Context, id int64) error {
	return b.l.WithOrderLock(ctx, id, func(context.Context) error { return nil })
}

// Through takes the second instance through calls.
func (b *Bank) Through(ctx context.Context, from, to int64) error { // want Through:`^acquires locks\.OrderLock$`
	return b.l.WithOrderLock(ctx, from, func(hctx context.Context) error {
		return b.touch(hctx, to) // want `^nested instances of one lock: locks.OrderLock\(to\) is taken while locks.OrderLock\(from\) is held`
	})
}

// Imported takes the second instance in another package.
func (b *Bank) Imported(ctx context.Context, from, to int64) error { // want Imported:`^acquires locks\.OrderLock$`
	return b.l.WithOrderLock(ctx, from, func(hctx context.Context) error {
		if err := ledger.Post(hctx, b.l, from); err != nil { // the instance held: a re-entry
			return err
		}
		return ledger.Post(hctx, b.l, to) // want `^nested instances of one lock: locks.OrderLock\(to\) is taken while locks.OrderLock\(from\) is held`
	})
}

// Handles holds the first instance from Lock to Unlock.
func (b *Bank) Handles(ctx context.Context, from, to int64) error { // want Handles:`^acquires locks\.OrderLock$`
	m := b.l.OrderLock(from)
	hctx, err := m.Lock(ctx)
	if err != nil {
		return err
	}
	defer m.Unlock(hctx)
	n := b.l.OrderLock(to)
	h2, err := n.Lock(hctx) // want `^nested instances of one lock: locks.OrderLock\(to\) is taken while locks.OrderLock\(from\) is held`
	if err != nil {
		return err
	}
	return n.Unlock(h2)
}

// Sequential releases the first instance before it takes the second.
func (b *Bank) Sequential(ctx context.Context, from, to int64) error { // want Sequential:`^acquires locks\.OrderLock$`
	m := b.l.OrderLock(from)
	hctx, err := m.Lock(ctx)
	if err != nil {
		return err
	}
	if err := m.Unlock(hctx); err != nil {
		return err
	}
	return b.touch(ctx, to)
}

// Released unlocks the first instance through a handle the analyzer
// cannot name, with the hold its Lock returned, before it takes the second.
func (b *Bank) Released(ctx context.Context, from, to int64) error { // want Released:`^acquires locks\.OrderLock$`
	m := b.l.OrderLock(from)
	hctx, err := m.Lock(ctx)
	if err != nil {
		return err
	}
	held := []*runtime.Mutex{m}
	if err := held[0].Unlock(hctx); err != nil {
		return err
	}
	return b.touch(ctx, to)
}

// Try takes the second instance without waiting: it fails rather than deadlocks.
func (b *Bank) Try(ctx context.Context, from, to int64) error { // want Try:`^acquires locks\.OrderLock$`
	return b.l.WithOrderLock(ctx, from, func(hctx context.Context) error {
		h2, err := b.l.OrderLock(to).TryLock(hctx, 0, 0)
		if err != nil {
			return err
		}
		return b.l.OrderLock(to).Unlock(h2)
	})
}

// Ordered takes the lower account first, and says so.
func (b *Bank) Ordered(ctx context.Context, from, to int64) error { // want Ordered:`^acquires locks\.LedgerLock$`
	first, second := from, to
	if second < first {
		first, second = second, first
	}
	return b.l.WithLedgerLock(ctx, first, func(hctx context.Context, fence int64) error {
		//lockgen:ignore every transfer takes the lower account first
		return b.l.WithLedgerLock(hctx, second, func(context.Context, int64) error { return nil })
	})
}

// Multi takes both in one multi lock, as the finding suggests; inside,
// either is re-entered.
func (b *Bank) Multi(ctx context.Context, from, to int64) error { // want Multi:`^acquires locks\.OrderLock$`
	both := b.c.MultiLock(runtime.LockOptions{Name: "Move"}, b.l.OrderLock(from), b.l.OrderLock(to))
	return both.Do(ctx, func(hctx context.Context) error {
		return b.l.WithOrderLock(hctx, to, func(context.Context) error { return nil })
	})
}

// Loop takes an instance for every id inside another's hold.
func (b *Bank) Loop(ctx context.Context, head int64, ids []int64) error { // want Loop:`^acquires locks\.OrderLock$`
	return b.l.WithOrderLock(ctx, head, func(hctx context.Context) error {
		for _, id := range ids {
			if err := b.touchOrder(hctx, id); err != nil { // want `^nested instances of one lock: locks.OrderLock\(id\) is taken while locks.OrderLock\(head\) is held`
				return err
			}
		}
		return nil
	})
}

// Slots nests two shops' semaphores: each waits for a permit the other's callers hold.
func (b *Bank) Slots(ctx context.Context, shop, other string) error { // want Slots:`^acquires locks\.PaymentSlots$`
	return b.l.WithPaymentSlots(ctx, shop, func(hctx context.Context) error {
		return b.l.WithPaymentSlots(hctx, other, func(context.Context) error { return nil }) // want `^nested instances of one lock: locks.PaymentSlots\(other\) is taken while locks.PaymentSlots\(shop\) is held \(take them in a fixed order\)$`
	})
}

// Readers share: two shops' catalogs read nested are not reported; a
// write inside a read of another shop is.
func (b *Bank) Readers(ctx context.Context, shop, other string) error { // want Readers:`^acquires locks\.Catalog$`
	return b.l.WithCatalogRead(ctx, shop, func(hctx context.Context) error {
		if err := b.l.WithCatalogRead(hctx, other, func(context.Context) error { return nil }); err != nil {
			return err
		}
		return b.l.WithCatalogWrite(hctx, other, func(context.Context) error { return nil }) // want `^nested instances of one lock: locks.Catalog\(other\) is taken while locks.Catalog\(shop\) is held`
	})
}

// Checkout holds a multi lock and re-enters its member for the same
// order; another order's lock is a nested instance of the member.
func (b *Bank) Checkout(ctx context.Context, id, other int64, sku string) error { // want Checkout:`^acquires locks\.InventoryLock, locks\.OrderLock$`
	return b.l.WithCheckoutLock(ctx, id, sku, func(hctx context.Context) error {
		if err := b.l.WithOrderLock(hctx, id, func(context.Context) error { return nil }); err != nil {
			return err
		}
		return b.l.WithOrderLock(hctx, other, func(context.Context) error { return nil }) // want `^nested instances of one lock: locks.OrderLock\(other\) is taken while locks.OrderLock\(id\) is held`
	})
}

type Order struct{ ID int64 }

// lock takes the order's lock, by its receiver's ID.
func (o *Order) lock(ctx context.Context, l *locks.Locks) error {
	return l.WithOrderLock(ctx, o.ID, func(context.Context) error { return nil })
}

// Same re-enters the instance held, written the same way directly, through
// a variable assigned once, through calls given the same param, and in a
// recursion with the hold's ctx.
func (b *Bank) Same(ctx context.Context, id int64, depth int) error { // want Same:`^acquires locks\.OrderLock$`
	return b.l.WithOrderLock(ctx, id, func(hctx context.Context) error {
		same := id
		if err := b.l.WithOrderLock(hctx, same, func(context.Context) error { return nil }); err != nil {
			return err
		}
		if err := b.touch(hctx, id); err != nil {
			return err
		}
		if depth > 0 {
			return b.Same(hctx, id, depth-1)
		}
		return nil
	})
}

// SameOrder re-enters the instance held by a method on the order, and
// through a call given the order.
func (b *Bank) SameOrder(ctx context.Context, o *Order) error { // want SameOrder:`^acquires locks\.OrderLock$`
	return b.l.WithOrderLock(ctx, o.ID, func(hctx context.Context) error {
		if err := o.lock(hctx, b.l); err != nil {
			return err
		}
		return b.settle(hctx, o)
	})
}

func (b *Bank) settle(ctx context.Context, o *Order) error { return b.touchOrder(ctx, o.ID) }

// SameValue locks an order it has by value, and hands its address to a
// helper that locks by the pointer's ID: the same instance.
func (b *Bank) SameValue(ctx context.Context, o Order) error { // want SameValue:`^acquires locks\.OrderLock$`
	return b.l.WithOrderLock(ctx, o.ID, func(hctx context.Context) error {
		return b.settle(hctx, &o)
	})
}
