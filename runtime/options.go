package runtime

import "time"

// LockOptions describes one lock: what the generated code declares from
// locks.yaml. The zero value is a watchdog lease and a single try.
type LockOptions struct {
	// Name is the logical name (e.g. "OrderLock"), used in errors, logs and
	// events. Optional.
	Name string
	// Lease is Watchdog (0): renewed while held, or a fixed duration > 0:
	// the key expires after it and is never renewed; the holder's ctx is
	// cancelled with ErrLockLost just before.
	Lease time.Duration
	// WaitTime is how long Do waits for the lock: 0 tries once, Forever
	// (any negative value) waits until the ctx is done.
	WaitTime time.Duration
	// QueueTimeout (fair locks) is how long a queued waiter may go silent
	// before the others skip it. A live waiter refreshes its place every
	// QueueTimeout/3 while it waits. Zero means 5m, as in Redisson.
	QueueTimeout time.Duration
	// WritersFirst (read-write locks): while a writer waits, new readers
	// wait behind it, so a steady stream of readers cannot starve writers.
	// A waiting writer that goes silent stops blocking readers after the
	// watchdog timeout. False keeps Redisson's order, where readers join
	// a read-held lock whenever they come.
	WritersFirst bool
	// SyncReplicas, when > 0, makes every acquisition wait (Redis WAIT,
	// up to Options.ReplicaTimeout) until that many replicas have the
	// write. If fewer acknowledge it, the acquisition is undone and fails
	// with ErrNotReplicated, so a failover cannot hand the lock to a
	// second owner through a replica that never saw it.
	SyncReplicas int
	// Quorum (RedLock) is how many of the RedLock nodes must grant the
	// lock. Zero means a majority.
	Quorum int
}

const defaultQueueTimeout = 5 * time.Minute
