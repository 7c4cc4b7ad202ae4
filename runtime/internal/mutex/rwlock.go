package mutex

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/lockgen/lockgen/internal/redisnames"
	"github.com/lockgen/lockgen/runtime/internal/errs"
	"github.com/lockgen/lockgen/runtime/internal/lockenv"
	"github.com/lockgen/lockgen/runtime/internal/scripts"
)

// The sides of a read-write lock (runtime.RWLock), with Redisson
// RReadWriteLock's layout: one hash at the key with field "mode"
// (read | write), one field per reading owner with its hold count, and
// "<owner>:write" for the writer; each read hold n also has its own key
// {key}:<owner>:rwlock_timeout:<n>, renewed with the hash.

func rwChannel(key string) string { return redisnames.Prefix("redisson_rwlock", key) }

// rwWriters is the set of waiting writers (writers first).
func rwWriters(key string) string { return redisnames.Prefix("lockgen_rwlock_writers", key) }

// readTimeoutKey is the key of read hold n of owner.
func readTimeoutKey(key, owner string, n int) string {
	return redisnames.Suffix(key, owner) + ":rwlock_timeout:" + strconv.Itoa(n)
}

// readTimeoutPrefix starts every read hold's timeout key of the lock
// (before ":<owner>:rwlock_timeout:<n>"): read_release.lua builds the
// other readers' keys from it, as Redisson's read unlock does.
func readTimeoutPrefix(key string) string {
	if strings.Contains(key, "{") {
		return key
	}
	return "{" + key + "}"
}

func writeField(owner string) string { return owner + ":write" }

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

type rwSide struct{}

func (rwSide) forceUnlock(ctx context.Context, m *Lock) (int64, error) {
	return scripts.RWForceUnlock.RunOnce(ctx, m.env.RDB, 2, []any{3: m.key, rwChannel(m.key), m.env.Publish}).Int64()
}

// readSide is the read side of an RWLock.
type readSide struct{ rwSide }

func (readSide) leave(context.Context, *Lock, lockArgs) (int64, error) {
	return 0, nil
}

func (readSide) acquire(ctx context.Context, m *Lock, a lockArgs, at attempt) (int64, error) {
	c := m.env
	owner := a.OwnerID()
	return scripts.ReadAcquire.Run(ctx, at.via, 4, []any{
		3: a.Key, readTimeoutKey(m.key, owner, at.count+1), at.marker, rwWriters(m.key),
		at.px, a.Owner, writeField(owner), at.count, c.MarkerTTL, flag(m.opts.WritersFirst),
	}).Int64()
}

func (readSide) release(ctx context.Context, m *Lock, a lockArgs, at attempt) (int64, error) {
	return scripts.ReadRelease.Run(ctx, at.via, 4, []any{
		3: a.Key, rwChannel(m.key), readTimeoutKey(m.key, a.OwnerID(), at.count), readTimeoutPrefix(m.key),
		a.Owner, m.env.Publish, at.count,
	}).Int64()
}

// writeSide is the write side of an RWLock.
type writeSide struct{ rwSide }

// checkUpgrade refuses, before any round trip, a write by an owner that
// holds a read hold and not the write side. A writer that took read holds
// (downgrade) re-enters its write hold, as in Redisson. The registry is
// the truth, not the ctx chain: a read in the chain may be released.
func checkUpgrade(m *Lock, owner string) error {
	if reads, _ := m.env.Reg.State(holdID{Key: m.key, Field: owner}, lockenv.Watchdog); reads == 0 {
		return nil
	}
	if writes, _ := m.env.Reg.State(holdID{Key: m.key, Field: writeField(owner)}, lockenv.Watchdog); writes > 0 {
		return nil
	}
	return fmt.Errorf("%w: the owner holds a read hold of this lock and not its write side", errs.Upgrade)
}

func (writeSide) acquire(ctx context.Context, m *Lock, a lockArgs, at attempt) (int64, error) {
	c := m.env
	return scripts.WriteAcquire.Run(ctx, at.via, 3, []any{
		3: a.Key, at.marker, rwWriters(m.key),
		at.px, a.Field, a.Owner, at.count, c.MarkerTTL, flag(m.opts.WritersFirst && at.waiting),
		c.Watchdog.Milliseconds(),
	}).Int64()
}

func (writeSide) release(ctx context.Context, m *Lock, a lockArgs, at attempt) (int64, error) {
	return scripts.WriteRelease.Run(ctx, at.via, 3, []any{
		3: a.Key, rwChannel(m.key), readTimeoutPrefix(m.key),
		at.px, a.Field, m.env.Publish, at.count,
	}).Int64()
}

func (writeSide) leave(ctx context.Context, m *Lock, a lockArgs) (int64, error) {
	return scripts.WriteLeave.Run(ctx, m.env.RDB, 3, []any{
		3: a.Key, rwChannel(m.key), rwWriters(m.key), a.Field, m.env.Publish,
	}).Int64()
}
