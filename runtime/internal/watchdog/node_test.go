package watchdog

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/runtime/internal/holds"
	"github.com/lockgen/lockgen/runtime/internal/scripts"
)

// On a Redis Cluster a master that does not answer holds up only the
// renewals of its own holds. One master, holding locks in more slots than
// a node has workers (a call serves one slot), is paused (SIGSTOP) as
// their renewals come due; a healthy master's holds, due in the same
// round, sorted after them and with earlier deadlines, are renewed all
// through the pause. When every call in flight, whatever its node, shared
// Workers slots, the paused master's calls took them all until their
// deadlines and every hold of the healthy master was lost.
func TestAPausedMasterHoldsUpOnlyItsOwnHolds(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("starts a cluster (4 s); skipped with -short (never under CI)")
	}
	cl := redistest.StartCluster(t)
	rdb := cl.Client(t)
	f := newFixtureOn(t, rdb)
	ctx := context.Background()
	// Loaded on every master now, so that no renewal needs a SCRIPT LOAD,
	// which goes to every master, the paused one too.
	if err := scripts.RenewBatch.Load(ctx, rdb); err != nil {
		t.Fatal(err)
	}
	masters := cl.Masters()
	paused, healthy := masters[0], masters[1] // the paused one's slots sort first
	const perMaster = 3 * Workers
	// The healthy master's holds were confirmed 20 ms before the others:
	// all are due in one round (within a quarter period), and the healthy
	// master's deadlines come before the paused master's calls end.
	keys, others := keysOn(t, rdb, healthy, perMaster), keysOn(t, rdb, paused, perMaster)
	now := time.Now()
	var kept, stalled []context.Context
	for _, key := range keys {
		kept = append(kept, f.holdSent(t, key, now.Add(-20*time.Millisecond)))
	}
	for _, key := range others {
		stalled = append(stalled, f.holdSent(t, key, now))
	}
	paused.Pause(6 * lease / 5) // past every deadline the holds had

	for i, h := range kept {
		if h.Err() != nil {
			t.Errorf("%d of %d holds on the healthy master: %s lost while another master was paused: %v",
				countDone(kept), len(kept), keys[i], context.Cause(h))
			break
		}
		if ttl := rdb.PTTL(ctx, keys[i]).Val(); ttl <= 0 || ttl > lease {
			t.Errorf("%s: PTTL %v, want in (0, %v]", keys[i], ttl, lease)
		}
	}
	// The pause did stop the paused master's renewals.
	if n := countDone(stalled); n != len(stalled) {
		t.Errorf("%d of %d holds on the paused master kept through a pause longer than their lease", len(stalled)-n, len(stalled))
	}
}

// keysOn returns n keys of distinct slots that master serves, as rdb's
// slot map has it.
func keysOn(t *testing.T, rdb *redis.ClusterClient, master *redistest.Server, n int) []string {
	t.Helper()
	seen := map[int]bool{}
	var keys []string
	for i := 0; len(keys) < n; i++ {
		key := "{node" + strconv.Itoa(i) + "}"
		node, err := rdb.MasterForKey(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		if s := scripts.KeySlot(key); !seen[s] && node.Options().Addr == master.Addr() {
			seen[s] = true
			keys = append(keys, key)
		}
	}
	return keys
}

// holdSent is hold with the hold confirmed at sent: its renewal is due
// and its deadline comes a lease after sent.
func (f *fixture) holdSent(t *testing.T, key string, sent time.Time) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := f.rdb.HSet(ctx, key, "o", 1).Err(); err != nil {
		t.Fatal(err)
	}
	f.rdb.PExpire(ctx, key, lease)
	return f.reg.Add(context.Background(), holds.Spec{Name: key, Key: key, Kind: "reentrant", From: taker{}}, holds.NewArgs(key, "o", "o"), 0, sent)
}

func countDone(hs []context.Context) int {
	n := 0
	for _, h := range hs {
		if h.Err() != nil {
			n++
		}
	}
	return n
}
