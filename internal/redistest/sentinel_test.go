package redistest_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockgen/lockgen/internal/redistest"
)

func TestSentinelFailsOverAndFailoverClientWritesToNewMaster(t *testing.T) {
	t.Parallel()
	start := time.Now()
	st := redistest.StartSentinel(t)
	t.Logf("master, replica and 3 sentinels up in %v", time.Since(start).Round(time.Millisecond))
	if len(st.SentinelAddrs()) != 3 || st.MasterName() == "" {
		t.Fatalf("SentinelAddrs %v, MasterName %q", st.SentinelAddrs(), st.MasterName())
	}
	ctx := context.Background()
	client := st.Client(t)
	old, replica := st.Master(), st.Replica()
	if err := client.Set(ctx, "before", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := old.Client(t).Get(ctx, "before").Result(); err != nil || got != "1" {
		t.Fatalf("FailoverClient did not write to the master: GET = %q, %v", got, err)
	}
	if n, err := old.Client(t).Wait(ctx, 1, 0).Result(); err != nil || n != 1 {
		t.Fatalf("WAIT 1 = %d, %v", n, err)
	}

	old.Kill()
	start = time.Now()
	promoted := st.WaitForFailover(t, settle)
	t.Logf("sentinels failed over %v after the kill", time.Since(start).Round(time.Millisecond))
	if promoted != replica || st.Master() != replica || st.Replica() != old {
		t.Fatalf("after failover: returned %s, Master %s, Replica %s; want master %s", promoted.Addr(), st.Master().Addr(), st.Replica().Addr(), replica.Addr())
	}

	start = time.Now()
	waitForSet(t, func(ctx context.Context) error { return client.Set(ctx, "after", "2", 0).Err() })
	t.Logf("FailoverClient wrote %v after the failover", time.Since(start).Round(time.Millisecond))
	pc := promoted.Client(t)
	for key, want := range map[string]string{"before": "1", "after": "2"} {
		if got, err := pc.Get(ctx, key).Result(); err != nil || got != want {
			t.Fatalf("GET %s on the new master = %q, %v; want %q", key, got, err, want)
		}
	}
}
