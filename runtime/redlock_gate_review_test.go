package runtime_test

import (
	"errors"
	"testing"
	"time"

	"github.com/lockgen/lockgen/runtime"
)

// A RedLock's fixed lease is valid for the lease less the drift from the
// earliest send of a granted node's try, not from the start of the round:
// while the nodes' admission gates are closed (their renewals run
// behind), a node's single try waits in its gate before it is sent, and
// counted from the round's start that wait came off the validity. With
// the gate holding single tries up to a quarter of their ReleaseTimeout
// (since reverted to 20 ms) every node granted the lock and the round
// still failed, for any lease under that wait (a review's finding).
func TestRedLockSingleTryWithAFixedLeaseIsHadWhileTheNodesGatesAreClosed(t *testing.T) {
	e := newRedEnv(t, runtime.Options{WatchdogTimeout: 3 * time.Second})
	ctx := ctxT(t)
	// A hold with the watchdog on every node: their watchdog loops run.
	other := e.c.RedLock("gate:other", runtime.LockOptions{})
	oh, err := other.TryLock(ctx, 0, runtime.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Unlock(oh) }()
	for _, n := range runtime.RedNodes(e.c) {
		release := runtime.StallRenewals(n)
		defer release()
	}
	for _, n := range runtime.RedNodes(e.c) {
		eventually(t, 5*time.Second, "the node's gate closes", func() bool { return runtime.AdmissionClosed(n) })
	}
	const lease = 500 * time.Millisecond
	l := e.c.RedLock("gate:fixed", runtime.LockOptions{})
	start := time.Now()
	h, err := l.TryLock(ctx, 0, lease)
	if err != nil {
		t.Fatalf("a free RedLock not had with its nodes' gates closed, after %v: %v", time.Since(start), err)
	}
	_ = l.Unlock(h)
}

// Work running under a RedLock hold is running work of its Client, as
// under any other hold: once Shutdown began (which waits for RedLock holds
// too), a lock it takes, on the Client or as another RedLock, is not
// refused as a fresh acquisition.
func TestWorkUnderARedLockHoldIsNotRefusedByShutdown(t *testing.T) {
	e := newRedEnv(t, runtime.Options{})
	ctx := ctxT(t)
	outer := e.c.RedLock("run:outer", runtime.LockOptions{})
	hold, err := outer.TryLock(ctx, 0, runtime.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	shut := make(chan error, 1)
	go func() { shut <- e.c.Shutdown(ctx) }()
	eventually(t, 5*time.Second, "Shutdown refuses fresh acquisitions", func() bool {
		_, err := e.c.Mutex("run:fresh", runtime.LockOptions{}).TryLock(ctx, 0, time.Second)
		return errors.Is(err, runtime.ErrDraining)
	})
	nested := e.c.Mutex("run:nested", runtime.LockOptions{})
	nh, err := nested.TryLock(hold, 0, runtime.Watchdog)
	if err != nil {
		t.Fatalf("a lock taken under a RedLock hold during Shutdown: %v", err)
	}
	inner := e.c.RedLock("run:inner", runtime.LockOptions{})
	ih, err := inner.TryLock(hold, 0, runtime.Watchdog)
	if err != nil {
		t.Fatalf("a RedLock taken under a RedLock hold during Shutdown: %v", err)
	}
	for _, release := range []error{inner.Unlock(ih), nested.Unlock(nh), outer.Unlock(hold)} {
		if release != nil {
			t.Fatal(release)
		}
	}
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}
