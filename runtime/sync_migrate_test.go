package runtime_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/internal/scripts"
)

// A lock with SyncReplicas writes on a connection of its own to its
// slot's master (WAIT counts that connection's writes), which go-redis
// does not redirect. A slot moved since the client last read its slot
// map (MOVED), or migrating with the lock's key not on its master yet
// (ASK), must not fail a lock with SyncReplicas where a lock without it
// is taken: go-redis redirects the latter.
func TestSyncReplicasTryFollowsAMovedSlot(t *testing.T) {
	skipShortOutsideCI(t)
	t.Parallel() // a cluster of its own
	cl := redistest.StartCluster(t)
	ctx := ctxT(t)
	// go-redis' defaults: the map is read again every 10 s, not within the test.
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs()})
	t.Cleanup(func() { _ = rdb.Close() })
	// A generous WAIT: a loaded machine may be slow to ack.
	c := newClient(t, rdb, &runtime.Options{ReplicaTimeout: 5 * time.Second})
	opts := runtime.LockOptions{Name: "Synced", SyncReplicas: 1}

	t.Run("moved", func(t *testing.T) {
		const key = "synced:{moved}"
		slot := scripts.KeySlot(key)
		m := c.Mutex(key, opts)
		takeAndRelease(ctx, t, m) // the client's map now shows the slot's master
		dst := cl.OtherMaster(key)
		cl.MigrateSlot(t, slot, dst)
		h, err := m.TryLock(ctx, 0, runtime.Watchdog)
		if err != nil {
			t.Fatalf("a single try after the slot moved: %v", err)
		}
		wantKeysIn(ctx, t, dst, slot, 1)
		// The hold's slot moves again: its release follows it.
		next := cl.OtherMaster(key)
		cl.MigrateSlot(t, slot, next)
		if err := m.Unlock(h); err != nil {
			t.Fatalf("release after the hold's slot moved: %v", err)
		}
		wantKeysIn(ctx, t, next, slot, 0)
	})

	// An ASK is not followed: on the node importing the slot the acquire
	// script meets TRYAGAIN, as a lock without SyncReplicas does. The
	// try is refused, and a waiter takes the lock once the slot moved.
	t.Run("migrating", func(t *testing.T) {
		const key = "synced:{migrating}"
		slot := scripts.KeySlot(key)
		m := c.Mutex(key, opts)
		takeAndRelease(ctx, t, m)
		dst := cl.OtherMaster(key)
		mig, err := cl.BeginMigration(slot, dst)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.TryLock(ctx, 0, runtime.Watchdog); !errors.Is(err, runtime.ErrUnavailable) {
			_ = mig.Finish()
			t.Fatalf("a single try while the slot migrates: %v, want ErrUnavailable", err)
		}
		wantKeysIn(ctx, t, mig.Src, slot, 0)
		wantKeysIn(ctx, t, dst, slot, 0)
		finished := make(chan error, 1)
		go func() {
			time.Sleep(100 * time.Millisecond)
			finished <- mig.Finish()
		}()
		h, err := m.TryLock(ctx, 10*time.Second, runtime.Watchdog)
		if err := <-finished; err != nil {
			t.Fatal(err)
		}
		if err != nil {
			t.Fatalf("a waiter across the migration's end: %v", err)
		}
		wantKeysIn(ctx, t, dst, slot, 1)
		if err := m.Unlock(h); err != nil {
			t.Fatal(err)
		}
		wantKeysIn(ctx, t, dst, slot, 0)
	})
}

// takeAndRelease takes m once and releases it.
func takeAndRelease(ctx context.Context, t *testing.T, m *runtime.Mutex) {
	t.Helper()
	h, err := m.TryLock(ctx, 0, runtime.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Unlock(h); err != nil {
		t.Fatal(err)
	}
}

// wantKeysIn checks that s has n keys of slot (CLUSTER COUNTKEYSINSLOT
// answers whatever the slot's state there).
func wantKeysIn(ctx context.Context, t *testing.T, s *redistest.Server, slot, n int) {
	t.Helper()
	got, err := s.Client(t).ClusterCountKeysInSlot(ctx, slot).Result()
	if err != nil {
		t.Fatal(err)
	}
	if got != int64(n) {
		t.Fatalf("%s has %d keys of slot %d, want %d", s.Addr(), got, slot, n)
	}
}
