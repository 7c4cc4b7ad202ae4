package main

import (
	"context"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	lockrt "github.com/lockgen/lockgen/runtime"
)

// extraKinds are lockgen's other lock kinds (scenario 6).
func extraKinds(version string) []*lib {
	return []*lib{
		{
			Name: "lockgen fair", Library: "github.com/lockgen/lockgen/runtime", Version: version, Kind: "fair",
			Settings: "FairLock (Redisson RFairLock layout: FIFO queue, only the head may take it; a release grants the lock to a lockgen head in any process), watchdog lease, WaitTime Forever",
			open: func(rdb redis.UniversalClient, _ *counter, _ *atomic.Int64) (locker, func()) {
				c, err := lockrt.NewClient(rdb, nil)
				must(err)
				return lockgenFair{c}, func() { _ = c.Close() }
			},
		},
		{
			Name: "lockgen rw", Library: "github.com/lockgen/lockgen/runtime", Version: version, Kind: "rw",
			Settings: "ReadWrite (Redisson RReadWriteLock layout), watchdog lease, WaitTime Forever",
			open: func(rdb redis.UniversalClient, _ *counter, _ *atomic.Int64) (locker, func()) {
				c, err := lockrt.NewClient(rdb, nil)
				must(err)
				return lockgenRW{c}, func() { _ = c.Close() }
			},
		},
	}
}

type lockgenFair struct{ c *lockrt.Client }

func (l lockgenFair) acquire(ctx context.Context, key string) (func() error, error) {
	return lockMutex(ctx, l.c.FairLock(key, lockrt.LockOptions{Name: "bench-fair", WaitTime: lockrt.Forever}))
}

// An rwLocker can also take shared (read) holds; the harness lets readers
// overlap and checks that no reader ever overlaps a writer.
type rwLocker interface {
	locker
	acquireRead(ctx context.Context, key string) (release func() error, err error)
}

type lockgenRW struct{ c *lockrt.Client }

func (l lockgenRW) acquire(ctx context.Context, key string) (func() error, error) {
	return lockMutex(ctx, l.c.ReadWrite(key, lockrt.LockOptions{Name: "bench-rw", WaitTime: lockrt.Forever}).Write())
}

func (l lockgenRW) acquireRead(ctx context.Context, key string) (func() error, error) {
	return lockMutex(ctx, l.c.ReadWrite(key, lockrt.LockOptions{Name: "bench-rw", WaitTime: lockrt.Forever}).Read())
}

func lockMutex(ctx context.Context, m *lockrt.Mutex) (func() error, error) {
	h, err := m.Lock(ctx)
	if err != nil {
		return nil, err
	}
	return func() error { return m.Unlock(h) }, nil
}
