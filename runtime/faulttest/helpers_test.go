// Package faulttest_test holds the runtime's slowest tests: the deadline
// invariant under every fault of design.md §7 for every kind
// (overlap_test.go), Redis Cluster failover (failover_test.go), Sentinel
// failover (sentinel_test.go) and the soak of many processes
// (soak_test.go). Kept apart from runtime's own tests they run as a
// package of their own, beside runtime's: go test ./... starts packages
// in the order of their import paths, two at a time on two cores, and
// this one sorts after runtime, so it starts once robustness is done and
// runtime's tests run meanwhile. (In internal/runtimetest it sorted
// before both, and runtime waited for it.) The helpers shared with
// runtime's tests are in internal/runtimetest.
package faulttest_test

import (
	"context"
	"time"

	"github.com/lockgen/lockgen/internal/runtimetest"
	"github.com/lockgen/lockgen/runtime"
)

// The names the tests here share with package runtime's tests.
var (
	newClient          = runtimetest.NewClient
	eventually         = runtimetest.Eventually
	ctxT               = runtimetest.Ctx
	skipShortOutsideCI = runtimetest.SkipShortOutsideCI
)

// exclusiveLocker is what the tests here need of an exclusive lock.
type exclusiveLocker interface {
	TryLock(ctx context.Context, wait, lease time.Duration) (context.Context, error)
	Unlock(ctx context.Context) error
}

// exclusiveKinds are the kinds whose holds exclude each other: a
// reentrant lock, a fair lock and the write side of a read-write lock.
var exclusiveKinds = []struct {
	name string
	new  func(c *runtime.Client, key string, o runtime.LockOptions) exclusiveLocker
}{
	{"reentrant", func(c *runtime.Client, key string, o runtime.LockOptions) exclusiveLocker { return c.Mutex(key, o) }},
	{"fair", func(c *runtime.Client, key string, o runtime.LockOptions) exclusiveLocker { return c.FairLock(key, o) }},
	{"write", func(c *runtime.Client, key string, o runtime.LockOptions) exclusiveLocker {
		return c.ReadWrite(key, o).Write()
	}},
}
