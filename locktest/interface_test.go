package locktest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/lockgen/lockgen/example/gen"
	"github.com/lockgen/lockgen/runtime"
)

// inventoryLocks is what ReserveOrBackorder needs of the generated locks:
// *gen.Locks has it, and so can a fake.
type inventoryLocks interface {
	WithInventoryLock(ctx context.Context, warehouse uint16, sku string, fn func(ctx context.Context) error) error
}

var _ inventoryLocks = (*gen.Locks)(nil)

// ReserveOrBackorder reserves n of sku, or records a backorder when the
// stock stays locked for longer than the lock's wait time.
func ReserveOrBackorder(ctx context.Context, locks inventoryLocks, stock Stock, backorders *[]string, sku string, n int) error {
	err := locks.WithInventoryLock(ctx, warehouse, sku, func(ctx context.Context) error {
		return take(ctx, stock, sku, n)
	})
	if errors.Is(err, runtime.ErrNotAcquired) {
		*backorders = append(*backorders, sku)
		return nil
	}
	return err
}

// busyLocks is a fake whose locks are always held by someone else.
type busyLocks struct{}

func (busyLocks) WithInventoryLock(ctx context.Context, warehouse uint16, sku string, fn func(ctx context.Context) error) error {
	return &runtime.LockError{Op: "acquire", Name: "InventoryLock", Err: runtime.ErrNotAcquired}
}

func TestABusySKUIsBackordered(t *testing.T) {
	var backorders []string
	stock := newFakeStock(map[string]int{"sku-1": 5})
	if err := ReserveOrBackorder(context.Background(), busyLocks{}, stock, &backorders, "sku-1", 2); err != nil {
		t.Fatal(err)
	}
	if len(backorders) != 1 {
		t.Fatalf("backorders %v, want sku-1", backorders)
	}
}
