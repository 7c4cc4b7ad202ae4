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
// slot is half moved, as in a reshard of a slot with many keys (see
// Migration).
func (c *Cluster) MigrateHalting(slot int, dst *Server, halt time.Duration) (*Server, error) {
	m, err := c.BeginMigration(slot, dst)
	if err != nil {
		return nil, err
	}
	if halt > 0 {
		if err := m.MoveFirst(1); err != nil {
			return m.Src, fmt.Errorf("%w (ending the migration: %v)", err, m.Finish())
		}
		time.Sleep(halt)
	}
	return m.Src, m.Finish()
}

// A Migration is a slot's move begun and not ended: the slot is MIGRATING
// on its master (Src) and IMPORTING on Dst, and the keys moved so far are
// on Dst, the others on Src. A command on keys split between the two
// meets TRYAGAIN; one on a key moved meets ASK on Src. Finish ends it.
type Migration struct {
	c            *Cluster
	slot         int
	Src, Dst     *Server
	view         []clusterNode
	srcID, dstID string
}

// BeginMigration begins moving slot from the master serving it to dst;
// Move moves some of its keys, Finish the rest. A slot already on dst is a
// Migration with Src == Dst, with nothing to move or finish.
func (c *Cluster) BeginMigration(slot int, dst *Server) (*Migration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	m := &Migration{c: c, slot: slot, Dst: dst}
	var err error
	for _, s := range c.nodes {
		if s.Running() {
			if m.view, err = s.clusterNodes(ctx); err == nil {
				break
			}
		}
	}
	if m.view == nil {
		return nil, fmt.Errorf("migrating slot %d: no node answers CLUSTER NODES: %v", slot, err)
	}
	for _, n := range m.view {
		if !n.replica && n.serves(slot) {
			m.Src = c.node(n.port)
		}
	}
	if m.Src == nil {
		return nil, fmt.Errorf("migrating slot %d: no master serves it", slot)
	}
	if m.Src == dst {
		return m, nil
	}
	st := m.steps(ctx)
	st.do("CLUSTER MYID", func() (err error) { m.srcID, err = m.Src.control().Do(ctx, "CLUSTER", "MYID").Text(); return err })
	st.do("CLUSTER MYID", func() (err error) { m.dstID, err = dst.control().Do(ctx, "CLUSTER", "MYID").Text(); return err })
	st.do("IMPORTING", st.setslot(dst, "IMPORTING", m.srcID))
	st.do("MIGRATING", st.setslot(m.Src, "MIGRATING", m.dstID))
	if st.failed != nil {
		return nil, st.failed
	}
	return m, nil
}

// Move moves keys, of the slot, to Dst.
func (m *Migration) Move(keys ...string) error {
	if m.Src == m.Dst || len(keys) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	st := m.steps(ctx)
	st.migrate(keys)
	return st.failed
}

// MoveFirst moves up to n of the keys left on Src to Dst.
func (m *Migration) MoveFirst(n int) error {
	if m.Src == m.Dst {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	st := m.steps(ctx)
	if keys := st.keysLeft(n); len(keys) > 0 {
		st.migrate(keys)
	}
	return st.failed
}

// Finish moves the slot's keys left on Src and hands the slot to Dst on
// every master.
func (m *Migration) Finish() error {
	if m.Src == m.Dst {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	st := m.steps(ctx)
	for st.failed == nil {
		keys := st.keysLeft(100)
		if len(keys) == 0 {
			break
		}
		st.migrate(keys)
	}
	st.do("NODE on the target", st.setslot(m.Dst, "NODE", m.dstID))
	st.do("NODE on the source", st.setslot(m.Src, "NODE", m.dstID))
	for _, n := range m.view {
		if s := m.c.node(n.port); s != nil && !n.replica && len(n.slots) > 0 && s != m.Src && s != m.Dst {
			st.do("NODE on "+s.Addr(), st.setslot(s, "NODE", m.dstID))
		}
	}
	return st.failed
}

// steps runs a migration's steps. Each is tried again until it succeeds or
// ctx ends, and after one failed the others are skipped: a step that failed
// once (a MIGRATE blocked by CLIENT PAUSE past the control client's read
// timeout) must not leave the slot half moved, where every multi-key
// command on it meets TRYAGAIN for good. A robustness run on a cluster
// failed so. Every step can be sent twice: MIGRATE moves what the source
// still has, SETSLOT sets what it set.
type steps struct {
	m      *Migration
	ctx    context.Context
	failed error
}

func (m *Migration) steps(ctx context.Context) *steps { return &steps{m: m, ctx: ctx} }

func (st *steps) do(what string, step func() error) {
	for st.failed == nil {
		err := step()
		if err == nil {
			return
		}
		if st.ctx.Err() != nil {
			st.failed = fmt.Errorf("migrating slot %d from %s to %s: %s: %w", st.m.slot, st.m.Src, st.m.Dst, what, err)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (st *steps) setslot(s *Server, args ...any) func() error {
	return func() error {
		return s.control().Do(st.ctx, append([]any{"CLUSTER", "SETSLOT", st.m.slot}, args...)...).Err()
	}
}

// keysLeft is up to n of the slot's keys still on Src.
func (st *steps) keysLeft(n int) (keys []string) {
	st.do("CLUSTER GETKEYSINSLOT", func() (err error) {
		keys, err = st.m.Src.control().ClusterGetKeysInSlot(st.ctx, st.m.slot, n).Result()
		return err
	})
	return keys
}

func (st *steps) migrate(keys []string) {
	args := []any{"MIGRATE", "127.0.0.1", st.m.Dst.Port(), "", 0, (5 * time.Second).Milliseconds(), "KEYS"}
	for _, k := range keys {
		args = append(args, k)
	}
	st.do("MIGRATE", func() error { return st.m.Src.control().Do(st.ctx, args...).Err() })
}
