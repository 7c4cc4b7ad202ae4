package redistest

import (
	"context"
	"testing"
	"time"
)

// MigrateSlot moves slot, with its keys, from the master serving it to
// dst, the way redis-cli --cluster reshard does: CLUSTER SETSLOT …
// IMPORTING on dst and MIGRATING on the source, MIGRATE of the slot's
// keys in batches, then SETSLOT … NODE on dst, on the source (which then
// drops the slot's shard channel subscriptions) and on every other
// master.
func (c *Cluster) MigrateSlot(tb testing.TB, slot int, dst *Server) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	var src *Server
	for _, n := range c.view() {
		if !n.replica && n.serves(slot) {
			src = c.node(n.port)
		}
	}
	if src == nil {
		tb.Fatalf("redistest: no master serves slot %d", slot)
	}
	if src == dst {
		return
	}
	must := func(what string, err error) {
		tb.Helper()
		if err != nil {
			tb.Fatalf("redistest: migrating slot %d from %s to %s: %s: %v", slot, src, dst, what, err)
		}
	}
	id := func(s *Server) string {
		v, err := s.control().Do(ctx, "CLUSTER", "MYID").Text()
		must("CLUSTER MYID", err)
		return v
	}
	srcID, dstID := id(src), id(dst)
	must("IMPORTING", dst.control().Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", srcID).Err())
	must("MIGRATING", src.control().Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", dstID).Err())
	for {
		keys, err := src.control().ClusterGetKeysInSlot(ctx, slot, 100).Result()
		must("CLUSTER GETKEYSINSLOT", err)
		if len(keys) == 0 {
			break
		}
		args := []any{"MIGRATE", "127.0.0.1", dst.Port(), "", 0, (5 * time.Second).Milliseconds(), "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		must("MIGRATE", src.control().Do(ctx, args...).Err())
	}
	must("NODE on the target", dst.control().Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dstID).Err())
	must("NODE on the source", src.control().Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dstID).Err())
	for _, m := range c.Masters() {
		if m != src && m != dst {
			must("NODE on "+m.Addr(), m.control().Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dstID).Err())
		}
	}
}
