package redistest_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockgen/lockgen/internal/redistest"
)

// A migration whose MIGRATE is blocked by CLIENT PAUSE WRITE past the
// control client's 1 s read timeout still completes once the pause ends:
// the slot does not stay MIGRATING/IMPORTING, where a multi-key command
// on it meets TRYAGAIN for good (a robustness run's final sweep did, after
// its nemesis paused the masters during a migration).
func TestMigrateOutlastsAClientPause(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t)
	ctx := context.Background()
	client := c.Client(t)
	a, b := "{mig}a", "{mig}b"
	for _, k := range []string{a, b} {
		if err := client.Set(ctx, k, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	src, dst := c.MasterForKey(a), c.OtherMaster(a)
	slot, err := client.ClusterKeySlot(ctx, a).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Client(t).Do(ctx, "client", "pause", 2500, "write").Err(); err != nil {
		t.Fatal(err)
	}
	if from, err := c.Migrate(int(slot), dst); err != nil || from != src {
		t.Fatalf("Migrate = %v, %v; want %s, nil", from, err, src.Addr())
	}
	// Both keys answer in one command on the slot's new master.
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := client.Exists(ctx, a, b).Result()
		if err == nil && n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("EXISTS %s %s after the migration = %d, %v", a, b, n, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := c.MasterForKey(a); got != dst {
		t.Fatalf("slot %d is served by %s, want %s", slot, got.Addr(), dst.Addr())
	}
}
