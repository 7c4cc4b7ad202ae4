package runtime_test

import (
	"errors"
	"testing"

	"github.com/lockgen/lockgen/runtime"
)

// A fair re-entry whose outer hold vanished (key deleted, another owner
// took the lock and released it) is reported as lost, as every other kind
// reports it, instead of taking the free lock as a new hold.
func TestFairReentryOfAVanishedHoldIsLost(t *testing.T) {
	_, admin, c := setup(t, nil)
	ctx := ctxT(t)
	m := c.FairLock("fairgone", runtime.LockOptions{})
	outer, err := m.TryLock(ctx, 0, runtime.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	admin.Del(ctx, "fairgone")
	other, err := m.TryLock(ctx, 0, runtime.Watchdog)
	if err != nil {
		t.Fatalf("another owner after the delete: %v", err)
	}
	if err := m.Unlock(other); err != nil {
		t.Fatal(err)
	}
	if _, err := m.TryLock(outer, 0, runtime.Watchdog); !errors.Is(err, runtime.ErrLockLost) {
		t.Fatalf("re-entry of a vanished fair hold = %v, want ErrLockLost", err)
	}
	if admin.Exists(ctx, "fairgone").Val() != 0 {
		t.Fatal("the refused re-entry took the lock")
	}
	_ = m.Unlock(outer)
}
