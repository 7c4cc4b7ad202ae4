package runtime_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/internal/scripts"
)

// A watchdog hold whose slot migrates to another master (as `redis-cli
// --cluster reshard` moves it: the key goes with it) is kept: its renewals
// follow the slot (MOVED) and renew it on the new master, never on the
// old one, for several leases; and its release deletes it there.
func TestHoldsFollowAMigratedSlot(t *testing.T) {
	// A cluster of its own; it mostly waits for renewals across leases.
	t.Parallel()
	cl := redistest.StartCluster(t)
	const wd = time.Second
	c := newClient(t, cl.Client(t), &runtime.Options{WatchdogTimeout: wd})
	ctx := ctxT(t)
	const key = "migrate:{hold}"
	m := c.Mutex(key, runtime.LockOptions{})
	hctx, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	src, dst := cl.MasterForKey(key), cl.OtherMaster(key)
	cl.MigrateSlot(t, scripts.KeySlot(key), dst)
	srcC, dstC := src.Client(t), dst.Client(t)
	// Three leases: a hold not renewed on the new master would have been
	// lost, and its key expired, twice over.
	for end := time.Now().Add(3 * wd); time.Now().Before(end); time.Sleep(wd / 4) {
		if err := hctx.Err(); err != nil {
			t.Fatalf("the hold was lost after its slot moved: %v", context.Cause(hctx))
		}
		if ttl := dstC.PTTL(ctx, key).Val(); ttl <= 0 || ttl > wd {
			t.Fatalf("on the new master the key's TTL is %v, want a renewed one within %v", ttl, wd)
		}
		if n := srcC.Exists(ctx, key).Val(); n != 0 {
			t.Fatal("the key is on the old master again: a renewal or a write went to the wrong node")
		}
	}
	if err := m.Unlock(hctx); err != nil {
		t.Fatal(err)
	}
	if dstC.Exists(ctx, key).Val()+srcC.Exists(ctx, key).Val() != 0 {
		t.Fatal("the key is left after the release")
	}
}
