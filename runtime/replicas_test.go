package runtime_test

import (
	"errors"
	"testing"
	"time"

	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/runtime"
)

func TestSyncReplicasUndoesAnUnreplicatedAcquisition(t *testing.T) {
	skipShortOutsideCI(t)
	t.Parallel() // servers of its own; its faults last seconds
	master, replica := redistest.StartReplicated(t)
	replica.WaitForSync(t, 20*time.Second)
	rdb := master.Client(t)
	ctx := ctxT(t)
	opts := runtime.LockOptions{Name: "Synced", SyncReplicas: 1}
	// A generous timeout while the replica is up: a loaded machine may be slow to ack.
	patient := newClient(t, rdb, &runtime.Options{ReplicaTimeout: 5 * time.Second}).Mutex("synced", opts)
	h, err := patient.TryLock(ctx, 0, runtime.Watchdog)
	if err != nil {
		t.Fatalf("with the replica up: %v", err)
	}
	if err := patient.Unlock(h); err != nil {
		t.Fatal(err)
	}
	m := newClient(t, rdb, &runtime.Options{ReplicaTimeout: 500 * time.Millisecond}).Mutex("synced", opts)

	for _, tc := range []struct {
		name    string
		breakIt func()
		mend    func()
	}{
		{"replica paused", func() { go replica.Pause(2 * time.Second) }, func() { time.Sleep(2 * time.Second) }},
		{"replica killed", replica.Kill, func() {}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.breakIt()
			time.Sleep(50 * time.Millisecond)
			start := time.Now()
			_, err := m.TryLock(ctx, 0, runtime.Watchdog)
			if !errors.Is(err, runtime.ErrNotReplicated) {
				t.Fatalf("err = %v, want ErrNotReplicated", err)
			}
			t.Logf("%v after %v", err, time.Since(start))
			if n := rdb.Exists(ctx, "synced").Val(); n != 0 {
				t.Fatal("the undone acquisition left the lock on the master")
			}
			tc.mend()
		})
	}

	// A multi-lock honours its members' SyncReplicas (taking them one by
	// one) and gives back what it took.
	c := newClient(t, rdb, &runtime.Options{ReplicaTimeout: 300 * time.Millisecond})
	multi := c.MultiLock(runtime.LockOptions{}, c.Mutex("plain", runtime.LockOptions{}), c.Mutex("synced", opts))
	if multi.Atomic() {
		t.Fatal("a member with SyncReplicas was taken by the atomic script")
	}
	if _, err := multi.TryLock(ctx, 0, runtime.Watchdog); !errors.Is(err, runtime.ErrNotReplicated) {
		t.Fatalf("multi-lock with the replica down: %v, want ErrNotReplicated", err)
	}
	if n := rdb.Exists(ctx, "plain", "synced").Val(); n != 0 {
		t.Fatal("the failed multi-lock left a member taken")
	}
}
