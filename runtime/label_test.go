package runtime_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/lockgen/lockgen/runtime"
)

func TestClientLabelsItsOwnerTokensWithHostPIDAndName(t *testing.T) {
	skipShortOutsideCI(t)
	t.Parallel() // servers of its own; it waits out seconds-long timeouts
	_, rdb, c := setup(t, &runtime.Options{Name: "checkout", WatchdogTimeout: 900 * time.Millisecond})
	ctx := ctxT(t)
	m := c.Mutex("label:1", runtime.LockOptions{Name: "OrderLock", Lease: 5 * time.Second})
	hctx, err := m.TryLock(ctx, 0, 5*time.Second) // a fixed lease writes a label too
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = m.Unlock(hctx) }()
	key := runtime.OwnerLabelKey(c.ID())
	var fields map[string]string
	eventually(t, 5*time.Second, "the owner label is written", func() bool {
		fields = rdb.HGetAll(ctx, key).Val()
		return len(fields) > 0
	})
	l, ok := runtime.ParseOwnerLabel(fields)
	host, _ := os.Hostname()
	if !ok || l.PID != os.Getpid() || l.Host != host || l.Name != "checkout" || l.Since.IsZero() {
		t.Fatalf("label %v (parsed %+v, %v), want pid %d, host %s, name checkout", fields, l, ok, os.Getpid(), host)
	}
	if ttl := rdb.PTTL(ctx, key).Val(); ttl <= 0 || ttl > 900*time.Millisecond {
		t.Fatalf("label TTL %v, want within the watchdog timeout", ttl)
	}
	// Renewed with the watchdog's rounds: alive after several timeouts.
	time.Sleep(2 * time.Second)
	if ttl := rdb.PTTL(ctx, key).Val(); ttl <= 0 {
		t.Fatalf("label gone (PTTL %v) while its client is open", ttl)
	}
	// Closed: no one renews it, and it expires.
	_ = c.Close()
	eventually(t, 3*time.Second, "the label of a closed client expires", func() bool {
		return rdb.Exists(context.Background(), key).Val() == 0
	})
}

func TestOwnerLabelKeyIsNoRedissonName(t *testing.T) {
	if k := runtime.OwnerLabelKey("u"); k != "lockgen_owner:u" {
		t.Fatalf("OwnerLabelKey = %q: inspect and docs read lockgen_owner:<uuid>", k)
	}
	if _, ok := runtime.ParseOwnerLabel(map[string]string{"host": "h"}); ok {
		t.Fatal("a hash without a pid parsed as a label")
	}
}
