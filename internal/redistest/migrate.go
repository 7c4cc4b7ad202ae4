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
	return c.MigrateHalting(slot, dst, 0)
}

// MigrateHalting is Migrate with a halt: it moves one of the slot's keys
// first and waits halt before it moves the others, so that for halt the
// slot is half moved (MIGRATING on its master, IMPORTING on dst, its keys
// on both), where a command on keys split between the two meets TRYAGAIN,
// as in a reshard of a slot with many keys.
func (c *Cluster) MigrateHalting(slot int, dst *Server, halt time.Duration) (*Server, error) {
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
	// Each step is tried again until it succeeds or clusterTimeout is
	// over: a step that failed once (a MIGRATE blocked by CLIENT PAUSE
	// past the control client's read timeout) must not leave the slot
	// half-moved, MIGRATING on the source and IMPORTING on dst, where
	// every multi-key command on it meets TRYAGAIN for good. A robustness
	// run on a cluster failed so. Every step can be sent twice: MIGRATE
	// moves what the source still has, SETSLOT sets what it set.
	var failed error
	must := func(what string, do func() error) bool {
		for failed == nil {
			err := do()
			if err == nil {
				return true
			}
			if ctx.Err() != nil {
				failed = fmt.Errorf("migrating slot %d from %s to %s: %s: %w", slot, src, dst, what, err)
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		return false
	}
	setslot := func(s *Server, args ...any) func() error {
		return func() error {
			return s.control().Do(ctx, append([]any{"CLUSTER", "SETSLOT", slot}, args...)...).Err()
		}
	}
	var srcID, dstID string
	if !must("CLUSTER MYID", func() (err error) { srcID, err = src.control().Do(ctx, "CLUSTER", "MYID").Text(); return err }) ||
		!must("CLUSTER MYID", func() (err error) { dstID, err = dst.control().Do(ctx, "CLUSTER", "MYID").Text(); return err }) ||
		!must("IMPORTING", setslot(dst, "IMPORTING", srcID)) ||
		!must("MIGRATING", setslot(src, "MIGRATING", dstID)) {
		return src, failed
	}
	for {
		var keys []string
		if !must("CLUSTER GETKEYSINSLOT", func() (err error) {
			keys, err = src.control().ClusterGetKeysInSlot(ctx, slot, 100).Result()
			return err
		}) {
			return src, failed
		}
		if len(keys) == 0 {
			break
		}
		if halt > 0 {
			keys = keys[:1]
		}
		args := []any{"MIGRATE", "127.0.0.1", dst.Port(), "", 0, (5 * time.Second).Milliseconds(), "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		if !must("MIGRATE", func() error { return src.control().Do(ctx, args...).Err() }) {
			return src, failed
		}
		time.Sleep(halt)
		halt = 0
	}
	must("NODE on the target", setslot(dst, "NODE", dstID))
	must("NODE on the source", setslot(src, "NODE", dstID))
	for _, n := range view {
		if m := c.node(n.port); m != nil && !n.replica && len(n.slots) > 0 && m != src && m != dst {
			must("NODE on "+m.Addr(), setslot(m, "NODE", dstID))
		}
	}
	return src, failed
}
