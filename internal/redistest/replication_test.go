package redistest_test

import (
	"context"
	"testing"

	"github.com/lockgen/lockgen/internal/redistest"
)

func TestReplicatedWriteOnMasterIsVisibleOnReplica(t *testing.T) {
	t.Parallel()
	master, replica := redistest.StartReplicated(t)
	ctx := context.Background()
	mc, rc := master.Client(t), replica.Client(t)

	write := func(value string) {
		t.Helper()
		if err := mc.Set(ctx, "k", value, 0).Err(); err != nil {
			t.Fatal(err)
		}
		// WAIT returns once the replica has acknowledged the write, so the
		// read below is not racing the replication stream.
		if n, err := mc.Wait(ctx, 1, 0).Result(); err != nil || n != 1 {
			t.Fatalf("WAIT 1 = %d, %v; want 1", n, err)
		}
		if got, err := rc.Get(ctx, "k").Result(); err != nil || got != value {
			t.Fatalf("GET k on replica = %q, %v; want %q", got, err, value)
		}
	}
	write("v1")

	replica.Restart()
	replica.WaitForSync(t, settle)
	write("v2")

	if err := rc.Set(ctx, "k", "x", 0).Err(); err == nil {
		t.Fatal("SET on the replica succeeded; want READONLY")
	}
}
