package runtime

import (
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
)

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
	// QueueTimeout/3 while it waits. Zero means 5m, as in Redisson; any
	// other value less than 10 ms, a negative one too, is refused
	// (ErrInvalidArgument).
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
	// lock. Zero means a majority; any other value less than a majority,
	// a negative one too, is refused (ErrInvalidArgument): two owners could
	// each hold it. More than the nodes is refused too.
	Quorum int
}

const defaultQueueTimeout = 5 * time.Minute

// Watchdog and Forever are the special values of LockOptions.
const (
	// Watchdog as a lease: the hold is renewed by the Client's watchdog
	// every WatchdogTimeout/3 for as long as it is held.
	Watchdog time.Duration = 0
	// Forever as a wait time: wait until the ctx is done.
	Forever time.Duration = -1
)

// Options configures a Client. The zero value is ready to use.
type Options struct {
	// WatchdogTimeout is the lease of holds that use the watchdog
	// (LockOptions.Lease == Watchdog). The watchdog renews them every
	// WatchdogTimeout/3. Zero means 30s, as in Redisson.
	WatchdogTimeout time.Duration

	// ReleaseTimeout bounds a release, which runs detached from the caller's
	// ctx (a cancelled caller never leaks a lock), and the settling of an
	// acquire whose reply was lost. Transport errors are retried within it.
	// Zero means 5s.
	ReleaseTimeout time.Duration

	// Logger receives lost locks and failed renewals and releases; each
	// kind of warning at most once per 10 s, the next one counting those
	// left out. Nil means slog.Default(), but only at Debug level: a
	// Client logs nothing unless asked to.
	// Nil means slog.Default().
	Logger *slog.Logger

	// Observer, when set, is told about acquisitions, waits, releases,
	// losses and watchdog rounds. Nil means no events.
	Observer Observer

	// Name, when set, names this Client in its owner label (package watchdog writes it), so
	// lockgen inspect shows it beside the host and pid of a hold's owner.
	Name string

	// ReplicaTimeout bounds the WAIT of locks with SyncReplicas > 0.
	// Zero means 1s.
	ReplicaTimeout time.Duration

	// RedLockNodes are the independent Redis masters that RedLocks span
	// (the client passed to NewClient is not one of them unless listed).
	RedLockNodes []redis.UniversalClient

	// PubSub chooses how waiters are woken. PubSubAuto (the zero value)
	// uses sharded pub/sub (SSUBSCRIBE/SPUBLISH) on a Redis Cluster that
	// accepts PUBSUB SHARDNUMSUB (probed as Redisson does), so an unlock
	// is not broadcast to every node, and classic pub/sub elsewhere. A
	// cluster that does not answer the probe within 10 s fails NewClient
	// with ErrUnavailable (Redisson does not start then either); set the
	// mode to skip the probe. Every client of one lock must use the same
	// mode (as Redisson's subscription mode must match).
	PubSub PubSubMode

	// NoHandoff turns off hand-offs, so that every waiter takes the lock
	// with an acquire of its own after an unlock message, as Redisson's
	// do. By default a release hands the lock over in its own script call:
	// a reentrant lock's last release to the longest waiter of the same
	// Client when no other client is subscribed to the lock's channel on
	// its server, or to the longest lockgen waiter of any Client when
	// only lockgen Clients that queue their waiters are, a fair lock's to
	// the head of the queue when it is a lockgen waiter (handoff.go,
	// grant.go and fair.go of runtime/internal/mutex). Turn the reentrant
	// hand-off off when Redisson clients that subscribe on replicas
	// (subscriptionMode SLAVE) wait for the same locks: Redis does not
	// count them, so they may wait up to 16 hand-offs for an unlock
	// message.
	NoHandoff bool
}

// PubSubMode selects classic or sharded pub/sub; see Options.PubSub.
type PubSubMode uint8

const (
	// PubSubAuto: sharded on a Redis Cluster that has it, classic elsewhere.
	PubSubAuto PubSubMode = iota
	// PubSubClassic: SUBSCRIBE and PUBLISH.
	PubSubClassic
	// PubSubSharded: SSUBSCRIBE and SPUBLISH (Redis >= 7).
	PubSubSharded
)

// forced is the flavour m forces (true: sharded), nil for auto.
func (m PubSubMode) forced() *bool {
	if m == PubSubAuto {
		return nil
	}
	sharded := m == PubSubSharded
	return &sharded
}
