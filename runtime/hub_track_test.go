package runtime_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/runtime"
)

// A lock freed without an unlock message (an operator's DEL) wakes its
// waiter through key tracking, long before the holder's TTL it saw.
func TestWaiterWakesWhenTheHeldKeyIsDeleted(t *testing.T) {
	s := redistest.Start(t)
	holder := newClient(t, s.Client(t), nil) // 30 s watchdog lease
	waiter := newClient(t, s.Client(t), nil)
	ctx := ctxT(t)
	hm := holder.Mutex("track:del", runtime.LockOptions{})
	h, err := hm.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan time.Time, 1)
	go func() {
		m := waiter.Mutex("track:del", runtime.LockOptions{})
		w, err := m.TryLock(ctx, 20*time.Second, runtime.Watchdog)
		if err != nil {
			t.Error(err)
			close(got)
			return
		}
		got <- time.Now()
		_ = m.Unlock(w)
	}()
	eventually(t, 5*time.Second, "waiter subscribed", func() bool {
		return s.Client(t).PubSubNumSub(ctx, "redisson_lock__channel:{track:del}").Val()["redisson_lock__channel:{track:del}"] == 1
	})
	time.Sleep(50 * time.Millisecond) // the tracking read is armed
	if err := s.Client(t).Del(ctx, "track:del").Err(); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	select {
	case at, ok := <-got:
		if !ok {
			return
		}
		t.Logf("acquired %v after the DEL", at.Sub(deleted).Round(time.Millisecond))
		if d := at.Sub(deleted); d > 5*time.Second {
			t.Fatalf("the waiter slept %v through a deleted key", d)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the waiter slept through a deleted key")
	}
	_ = hm.Unlock(h) // its hold is gone (ErrLockLost): only the local state goes
}

// Where the server refuses CLIENT TRACKING (an ACL), the hub still wakes
// waiters on unlock messages: tracking is an addition, never a
// requirement.
func TestWaitersWakeOnUnlockWhenTrackingIsRefused(t *testing.T) {
	s := redistest.Start(t)
	ctx := ctxT(t)
	admin := s.Client(t)
	if err := admin.Do(ctx, "ACL", "SETUSER", "notrack", "on", ">pw", "+@all", "-client", "~*", "&*").Err(); err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), Username: "notrack", Password: "pw"})
	t.Cleanup(func() { _ = rdb.Close() })
	if err := rdb.Do(ctx, "client", "id").Err(); err == nil {
		t.Fatal("CLIENT allowed: the ACL does not reproduce the case")
	}
	c := newClient(t, rdb, nil)
	m := c.Mutex("track:acl", runtime.LockOptions{})
	h, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		w, err := m.TryLock(context.Background(), 10*time.Second, runtime.Watchdog)
		if err == nil {
			err = m.Unlock(w)
		}
		done <- err
	}()
	eventually(t, 5*time.Second, "waiter subscribed", func() bool {
		return admin.PubSubNumSub(ctx, "redisson_lock__channel:{track:acl}").Val()["redisson_lock__channel:{track:acl}"] == 1
	})
	start := time.Now()
	if err := m.Unlock(h); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("woken after %v: the unlock message was not delivered", d)
	}
}

// waitInBackground has c wait up to 20 s for key, and unlock it once
// acquired; the channel gets the wait's error.
func waitInBackground(ctx context.Context, c *runtime.Client, key string) <-chan error {
	got := make(chan error, 1)
	go func() {
		m := c.Mutex(key, runtime.LockOptions{})
		w, err := m.TryLock(ctx, 20*time.Second, runtime.Watchdog)
		if err == nil {
			_ = m.Unlock(w)
		}
		got <- err
	}()
	return got
}

// expectAcquired fails with why unless the wait on got succeeds within d.
func expectAcquired(t *testing.T, got <-chan error, d time.Duration, why string) {
	t.Helper()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(d):
		t.Fatal(why)
	}
}
