package runtime_test

import (
	"errors"
	"testing"
	"time"

	"github.com/lockgen/lockgen/runtime"
)

// A member's own Unlock given an atomic multi-lock's hold ctx is another
// handle's Unlock of that hold: refused with ErrNotHeld, and the
// multi-lock's Unlock then releases every member. It was accepted: it
// released that member and ended the multi-lock's hold, whose Unlock then
// stopped at the released member, leaving the other one locked and renewed
// until Close. In either mode nothing is left locked after the
// multi-lock's Unlock.
func TestAMembersUnlockOfAMultiLockHoldLeavesNothingLocked(t *testing.T) {
	for _, mode := range []string{"atomic", "in order"} {
		t.Run(mode, func(t *testing.T) {
			e := newEnv(t, &runtime.Options{WatchdogTimeout: time.Second})
			ctx := ctxT(t)
			a := e.c.Mutex("member:a", runtime.LockOptions{})
			b := e.c.Mutex("member:b", runtime.LockOptions{})
			if mode == "in order" {
				b = e.c.FairLock("member:b", runtime.LockOptions{}) // a fair member makes it in order
			}
			ml := e.c.MultiLock(runtime.LockOptions{}, a, b)
			if ml.Atomic() != (mode == "atomic") {
				t.Fatalf("Atomic() = %v", ml.Atomic())
			}
			h, err := ml.TryLock(ctx, 0, runtime.Watchdog)
			if err != nil {
				t.Fatal(err)
			}
			errMember := a.Unlock(h)
			if mode == "atomic" && !errors.Is(errMember, runtime.ErrNotHeld) {
				t.Errorf("a member's Unlock of the atomic multi-lock's hold = %v, want ErrNotHeld", errMember)
			}
			errMulti := ml.Unlock(h)
			t.Logf("member's Unlock: %v; the multi-lock's: %v", errMember, errMulti)
			eventually(t, 3*time.Second, "both members free", func() bool {
				return e.rdb.Exists(ctx, "member:a", "member:b").Val() == 0
			})
		})
	}
}
