package redistest

import (
	"context"
	"fmt"
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
	if _, err := c.Migrate(slot, dst); err != nil {
		tb.Fatalf("redistest: %v", err)
	}
}

// Migrate is MigrateSlot for a caller that is not the test's goroutine
// (a fault injected while a workload runs): it returns the master the
// slot was on (dst: nothing moved), or what failed.
func (c *Cluster) Migrate(slot int, dst *Server) (*Server, error) {
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	var view []clusterNode
	var err error
	for _, s := range c.nodes {
		if s.Running() {
			if view, err = s.clusterNodes(ctx); err == nil {
				break
			}
		}
	}
	if view == nil {
		return nil, fmt.Errorf("migrating slot %d: no node answers CLUSTER NODES: %v", slot, err)
	}
	var src *Server
	for _, n := range view {
		if !n.replica && n.serves(slot) {
			src = c.node(n.port)
		}
	}
	if src == nil {
		return nil, fmt.Errorf("migrating slot %d: no master serves it", slot)
	}
	if src == dst {
		return src, nil
	}
	var failed error
	must := func(what string, err error) bool {
		if err != nil && failed == nil {
			failed = fmt.Errorf("migrating slot %d from %s to %s: %s: %w", slot, src, dst, what, err)
		}
		return failed == nil
	}
	id := func(s *Server) string {
		v, err := s.control().Do(ctx, "CLUSTER", "MYID").Text()
		must("CLUSTER MYID", err)
		return v
	}
	srcID, dstID := id(src), id(dst)
	if !must("IMPORTING", dst.control().Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", srcID).Err()) ||
		!must("MIGRATING", src.control().Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", dstID).Err()) {
		return src, failed
	}
	for {
		keys, err := src.control().ClusterGetKeysInSlot(ctx, slot, 100).Result()
		if !must("CLUSTER GETKEYSINSLOT", err) {
			return src, failed
		}
		if len(keys) == 0 {
			break
		}
		args := []any{"MIGRATE", "127.0.0.1", dst.Port(), "", 0, (5 * time.Second).Milliseconds(), "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		if !must("MIGRATE", src.control().Do(ctx, args...).Err()) {
			return src, failed
		}
	}
	must("NODE on the target", dst.control().Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dstID).Err())
	must("NODE on the source", src.control().Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dstID).Err())
	for _, n := range view {
		if m := c.node(n.port); m != nil && !n.replica && len(n.slots) > 0 && m != src && m != dst {
			must("NODE on "+m.Addr(), m.control().Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dstID).Err())
		}
	}
	return src, failed
}
