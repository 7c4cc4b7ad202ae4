package runtime_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lockgen/lockgen/runtime"
)

// Redisson RLock layout: a hash at the key, field "<uuid>:<n>" = hold
// count, PEXPIRE = lease (30 s watchdog), and "0" published on
// redisson_lock__channel:{key} when the last hold is released.
func TestMutexUsesRedissonLayout(t *testing.T) {
	_, rdb, c := setup(t, nil)
	ctx := ctxT(t)
	sub := rdb.Subscribe(ctx, "redisson_lock__channel:{order:42}")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	m := c.Mutex("order:42", runtime.LockOptions{})
	h, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	typ, _ := rdb.Type(ctx, "order:42").Result()
	if typ != "hash" {
		t.Fatalf("type %q, want hash", typ)
	}
	fields, _ := rdb.HGetAll(ctx, "order:42").Result()
	if len(fields) != 1 {
		t.Fatalf("fields %v, want one", fields)
	}
	for f, v := range fields {
		if !strings.HasPrefix(f, c.ID()+":") || v != "1" {
			t.Fatalf("field %q=%q, want %q:<n>=1", f, v, c.ID())
		}
	}
	if ttl, _ := rdb.PTTL(ctx, "order:42").Result(); ttl < 29*time.Second || ttl > 30*time.Second {
		t.Fatalf("PTTL %v, want ~30s (watchdog lease)", ttl)
	}
	if err := m.Unlock(h); err != nil {
		t.Fatal(err)
	}
	msg, err := sub.ReceiveMessage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Payload != "0" {
		t.Fatalf("unlock message %q, want \"0\"", msg.Payload)
	}
}

// A lock written the way Redisson writes it (another owner's field) excludes
// this client, and Redisson's unlock message wakes it.
func TestMutexExcludesAndWakesOnRedissonHolder(t *testing.T) {
	_, rdb, c := setup(t, nil)
	ctx := ctxT(t)
	javaOwner := "5f0c8e3a-7c1e-4a1b-9d55-0a4fdb1c2e11:1"
	rdb.HSet(ctx, "shared", javaOwner, 1)
	rdb.PExpire(ctx, "shared", 30*time.Second)
	m := c.Mutex("shared", runtime.LockOptions{})
	if _, err := m.TryLock(ctx, 0, runtime.Watchdog); err == nil {
		t.Fatal("acquired a lock held by a Redisson owner")
	}
	got := make(chan error, 1)
	go func() {
		h, err := m.TryLock(ctx, 10*time.Second, runtime.Watchdog)
		if err == nil {
			err = m.Unlock(h)
		}
		got <- err
	}()
	time.Sleep(200 * time.Millisecond)
	// What Redisson's unlock script does for the last hold.
	rdb.Del(ctx, "shared")
	rdb.Publish(ctx, "redisson_lock__channel:{shared}", "0")
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Redisson's unlock message did not wake the waiter")
	}
}

func TestHashTaggedKeyKeepsRedissonNames(t *testing.T) {
	_, rdb, c := setup(t, nil)
	ctx := ctxT(t)
	sub := rdb.Subscribe(ctx, "redisson_lock__channel:report:{acme}")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Mutex("report:{acme}", runtime.LockOptions{}).Do(ctx, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if msg, err := sub.ReceiveMessage(ctx); err != nil || msg.Payload != "0" {
		t.Fatalf("message %v %v", msg, err)
	}
}
