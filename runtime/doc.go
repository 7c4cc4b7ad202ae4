// Package runtime is what lockgen's generated code calls: a Redis lock
// client with Redisson's semantics and wire layout, shaped for Go.
//
// A Client wraps any go-redis UniversalClient (single node, Sentinel,
// Cluster). Lock handles such as Mutex are cheap values created per key.
//
//	c, _ := runtime.NewClient(rdb, nil)
//	defer c.Close()
//	err := c.Mutex("order:42", runtime.LockOptions{Name: "OrderLock", WaitTime: 3 * time.Second}).
//		Do(ctx, func(ctx context.Context) error {
//			// critical section; ctx is cancelled if the lock is lost
//			return nil
//		})
//
// # Ownership
//
// Go has no thread identity, so the owner of a hold is carried by
// context.Context. Lock, TryLock and Do hand out a ctx carrying an owner
// token "<client uuid>:<n>"; acquiring the same lock again with that ctx (or
// one derived from it) re-enters it, incrementing the hold count in Redis
// exactly as Redisson does for a thread. Unlock takes the ctx the
// acquisition returned. Goroutines that share a hold's ctx share the hold.
//
// # Leases and lost locks
//
// A hold has either the watchdog lease (LockOptions.Lease == Watchdog: the
// key expires after Options.WatchdogTimeout unless renewed, and the
// Client's single watchdog loop renews every such hold every timeout/3 in
// batched script calls) or a fixed lease (never renewed). The ctx of a hold
// is cancelled with a cause wrapping ErrLockLost as soon as a renewal finds
// the hold gone, when a lease runs out (minus a drift margin) without a
// confirmed renewal, or when a fixed lease is about to end.
//
// # Waiting
//
// An acquisition tries once; on contention it subscribes to the lock's
// Redisson channel through the Client's one pub/sub connection, tries
// again, then sleeps until an unlock message wakes it or the holder's lease
// would have run out. One unlock wakes one waiter. An uncontended acquire
// and release cost exactly one round trip each.
//
// # Failures
//
// Releases run detached from the caller's ctx with Options.ReleaseTimeout,
// are resent on transport errors and are idempotent (a resend never counts
// down twice). An acquire whose reply is lost is settled: it either took
// the lock, and the caller holds it, or it is marked aborted on the server.
// The scripts get both without writing anything per request: they are
// sent the hold count the owner has before the call, and one owner's calls
// on one lock take turns, so a resent copy finds the count already moved
// and does nothing. Errors are *LockError values wrapping the
// sentinels of this package.
//
// # Redis layout
//
// Keys, hash fields, channels and messages are Redisson's: a Java service
// using RLock and a Go service using Mutex on the same key exclude and wake
// each other.
package runtime
