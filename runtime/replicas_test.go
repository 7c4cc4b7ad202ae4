package runtime_test

import (
	"errors"
	"testing"
	"time"

	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/runtime"
)

func TestSyncReplicasUndoesAnUnreplicatedAcquisition(t *testing.T) {
	master, replica := redistest.StartReplicated(t)
	replica.WaitForSync(t, 20*time.Second)
	rdb := master.Client(t)
	ctx := ctxT(t)
	c := newClient(t, rdb, &runtime.Options{ReplicaTimeout: 500 * time.Millisecond})
	m := c.Mutex("synced", runtime.LockOptions{Name: "Synced", SyncReplicas: 1})

	h, err := m.TryLock(ctx, 0, runtime.Watchdog)
	if err != nil {
		t.Fatalf("with the replica up: %v", err)
	}
	if err := m.Unlock(h); err != nil {
		t.Fatal(err)
	}

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
}
