package redistest_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/lockgen/lockgen/internal/redistest"
)

// settle bounds every wait for a failover or a rejoin: a few seconds on an
// idle machine, generous for a loaded one.
const settle = 30 * time.Second

func TestClusterServesKeysInEverySlotRange(t *testing.T) {
	t.Parallel()
	start := time.Now()
	c := redistest.StartCluster(t)
	t.Logf("cluster of 6 nodes up in %v", time.Since(start).Round(time.Millisecond))

	if got := len(c.Addrs()); got != 6 {
		t.Fatalf("Addrs: %d nodes, want 6", got)
	}
	masters, replicas := c.Masters(), c.Replicas()
	if len(masters) != 3 || len(replicas) != 3 {
		t.Fatalf("Masters: %d, Replicas: %d; want 3 and 3", len(masters), len(replicas))
	}
	for _, r := range replicas {
		if slices.Contains(masters, r) {
			t.Fatalf("%s is listed as master and replica", r.Addr())
		}
	}

	ctx := context.Background()
	client := c.Client(t)
	served := map[*redistest.Server]bool{}
	for i := range 30 {
		key := fmt.Sprintf("key-%d", i)
		if err := client.Set(ctx, key, i, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", key, err)
		}
		if got, err := client.Get(ctx, key).Int(); err != nil || got != i {
			t.Fatalf("GET %s = %d, %v; want %d", key, got, err, i)
		}
		owner := c.MasterForKey(key)
		served[owner] = true
		if got, err := owner.Client(t).Get(ctx, key).Int(); err != nil || got != i {
			t.Fatalf("GET %s on MasterForKey %s = %d, %v; want %d", key, owner.Addr(), got, err, i)
		}
	}
	if len(served) != 3 {
		t.Fatalf("30 keys landed on %d masters, want all 3", len(served))
	}
}

func TestClusterPromotesReplicaAndRejoinsRestartedMaster(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t)
	ctx := context.Background()
	client := c.Client(t)
	const key = "doomed"
	if err := client.Set(ctx, key, "v1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	old := c.MasterForKey(key)

	old.Kill()
	start := time.Now()
	c.WaitForState(t, settle)
	t.Logf("failover settled %v after the kill", time.Since(start).Round(time.Millisecond))
	promoted := c.MasterForKey(key)
	if promoted == old || !promoted.Running() {
		t.Fatalf("MasterForKey after failover = %s (running %v), want a promoted replica", promoted.Addr(), promoted.Running())
	}
	if slices.Contains(c.Masters(), old) || slices.Contains(c.Replicas(), old) {
		t.Fatalf("killed master %s still listed", old.Addr())
	}
	start = time.Now()
	waitForSet(t, func(ctx context.Context) error { return client.Set(ctx, key, "v2", 0).Err() })
	t.Logf("client wrote to the promoted master %v later", time.Since(start).Round(time.Millisecond))

	old.Restart()
	start = time.Now()
	c.WaitForState(t, settle)
	t.Logf("restarted master rejoined %v after the restart", time.Since(start).Round(time.Millisecond))
	if got := c.MasterForKey(key); got != promoted {
		t.Fatalf("MasterForKey after rejoin = %s, want %s", got.Addr(), promoted.Addr())
	}
	if !slices.Contains(c.Replicas(), old) || len(c.Masters()) != 3 || len(c.Replicas()) != 3 {
		t.Fatalf("after rejoin: masters %v, replicas %v; want %v among 3 replicas", c.Masters(), c.Replicas(), old)
	}
	if got, err := client.Get(ctx, key).Result(); err != nil || got != "v2" {
		t.Fatalf("GET %s = %q, %v; want v2", key, got, err)
	}
}

// TestClusterShardedPubSub records what the runtime relies on: SSUBSCRIBE
// through a ClusterClient lands on the channel's master, PUBSUB SHARDNUMSUB
// counts it only there, and SPUBLISH, also from a script whose keys share
// the channel's slot, delivers.
func TestClusterShardedPubSub(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t)
	ctx := context.Background()
	client := c.Client(t)
	const channel = "{lock}:channel"

	sub := client.SSubscribe(ctx, channel)
	t.Cleanup(func() { _ = sub.Close() })
	if _, err := sub.Receive(ctx); err != nil { // the subscription confirmation
		t.Fatal(err)
	}
	owner := c.MasterForKey(channel)
	for _, m := range c.Masters() {
		n, err := m.Client(t).PubSubShardNumSub(ctx, channel).Result()
		if err != nil {
			t.Fatal(err)
		}
		want := int64(0)
		if m == owner {
			want = 1
		}
		if n[channel] != want {
			t.Fatalf("PUBSUB SHARDNUMSUB on %s = %v, want %d (owner %s)", m.Addr(), n, want, owner.Addr())
		}
	}

	if err := client.SPublish(ctx, channel, "direct").Err(); err != nil {
		t.Fatal(err)
	}
	const script = `redis.call('SET', KEYS[1], '1'); return redis.call('SPUBLISH', KEYS[2], ARGV[1])`
	if err := client.Eval(ctx, script, []string{"{lock}:key", channel}, "scripted").Err(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"direct", "scripted"} {
		recvCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		msg, err := sub.ReceiveMessage(recvCtx)
		cancel()
		if err != nil || msg.Payload != want {
			t.Fatalf("message = %v, %v; want %q", msg, err, want)
		}
	}
}

// waitForSet retries set until it succeeds: after a failover a client may
// need a moment and a retry to find the new master.
func waitForSet(t *testing.T, set func(context.Context) error) {
	t.Helper()
	deadline := time.Now().Add(settle)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := set(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("write after failover still failing: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
