package runtime_test

import (
	"context"
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

// A member re-entered inside an atomic multi-lock's hold (its Lock or Do
// with the multi-lock's hold ctx, as a With<Member> inside With<Multi>
// does) is the member's own acquisition: its own Unlock releases it, and
// the multi-lock's Unlock then leaves nothing locked. The refusal above
// refused it too (the re-entry shares the member's hold).
func TestAMemberReenteredInsideAMultiLockHoldIsReleasedByItsOwnUnlock(t *testing.T) {
	e := newEnv(t, &runtime.Options{WatchdogTimeout: time.Second})
	ctx := ctxT(t)
	a := e.c.Mutex("reenter:a", runtime.LockOptions{})
	b := e.c.Mutex("reenter:b", runtime.LockOptions{})
	ml := e.c.MultiLock(runtime.LockOptions{}, a, b)
	h, err := ml.TryLock(ctx, 0, runtime.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	h2, err := a.Lock(h)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Unlock(h2); err != nil {
		t.Errorf("the member's Unlock of its own re-entry: %v", err)
	}
	if err := a.Do(h, func(context.Context) error { return nil }); err != nil {
		t.Errorf("the member's Do inside the multi-lock's hold: %v", err)
	}
	//lockgen:ignore the test checks that this misuse is refused with ErrNotHeld
	if err := a.Unlock(h); !errors.Is(err, runtime.ErrNotHeld) {
		t.Errorf("the member's Unlock of the multi-lock's hold = %v, want ErrNotHeld", err)
	}
	if err := ml.Unlock(h); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Second, "both members free", func() bool {
		return e.rdb.Exists(ctx, "reenter:a", "reenter:b").Val() == 0
	})
}
