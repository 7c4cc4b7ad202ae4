package runtime

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// acquireReplicated runs one acquire attempt on a single connection to the
// key's master and, when it took the lock, WAITs there until
// LockOptions.SyncReplicas replicas acknowledge it. WAIT counts the writes
// of its own connection, which is why both run on one. An acquisition too
// few replicas acknowledged is undone on the master and reported as
// ErrNotReplicated: Redisson's checkLockSyncedSlaves, without leaving the
// lock behind.
func (m *Mutex) acquireReplicated(ctx context.Context, a lockArgs, at attempt) (int64, error) {
	conn, err := stickyConn(ctx, m.c.rdb, m.key)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	at.via = conn
	ttl, err := m.k.acquire(ctx, m, a, at)
	if err != nil || ttl != 0 {
		return ttl, err
	}
	want := m.opts.SyncReplicas
	acked, err := conn.Wait(ctx, want, m.c.opts.ReplicaTimeout).Result()
	if err == nil && acked >= int64(want) {
		return 0, nil
	}
	m.undo(ctx, a, at)
	if err != nil {
		return 0, fmt.Errorf("%w: WAIT %d: %w", ErrNotReplicated, want, err)
	}
	return 0, fmt.Errorf("%w: %d of %d replicas acknowledged within %v", ErrNotReplicated, acked, want, m.c.opts.ReplicaTimeout)
}

// undo drops the one count of the hold that attempt at took.
func (m *Mutex) undo(ctx context.Context, a lockArgs, at attempt) {
	u := attempt{via: at.via, px: at.px, count: at.count + 1}
	if _, err := m.c.calls.retry(ctx, func(ctx context.Context) (int64, error) { return m.k.release(ctx, m, a, u) }); err != nil {
		m.c.warn("undoing an acquisition failed", "lock", m.opts.Name, "key", m.key, "err", err)
	}
}

// stickyConn returns one connection to the master serving key.
func stickyConn(ctx context.Context, rdb redis.UniversalClient, key string) (*redis.Conn, error) {
	switch rdb := rdb.(type) {
	case *redis.Client:
		return rdb.Conn(), nil
	case *redis.ClusterClient:
		node, err := rdb.MasterForKey(ctx, key)
		if err != nil {
			return nil, err
		}
		return node.Conn(), nil
	}
	return nil, fmt.Errorf("%w: SyncReplicas needs a *redis.Client or *redis.ClusterClient, not %T", ErrInvalidArgument, rdb)
}
