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
// A hold is of one lock: its key, kind and fencing. Its owner cannot take
// another kind of lock on the same key (a FairLock or a FencedLock on a
// Mutex's key, the read side on either): the acquisition is refused with
// ErrInvalidArgument, where Redisson lets an RLock re-enter an RFairLock
// of the same name. Only a read-write lock's sides go together: the
// writer may take read holds (a downgrade), not a reader the write side
// (ErrUpgrade). Another kind's Unlock of a hold returns ErrNotHeld.
//
// # Leases and lost locks
//
// A hold has either the watchdog lease (LockOptions.Lease == Watchdog: the
// key expires after Options.WatchdogTimeout unless renewed; the Client's
// one watchdog renews each such hold timeout/3 after its last confirmed
// renewal, in batched script calls) or a fixed lease (never renewed).
//
// The promise to a holder: the hold's ctx is done, with a cause wrapping
// ErrLockLost, before any other owner can be granted the lock, whatever the
// network or Redis does. Each hold has one deadline: the send time of the
// last request that confirmed it (an acquire, a renewal) plus that lease,
// minus a drift margin of 1% + 5 ms. It only moves forward, and a clock
// goroutine that does no I/O ends the hold there; renewals only report
// confirmations, under ctx deadlines that end at the deadline they serve,
// on a go-redis client that honours them (the Client builds one from the
// given client's options when ContextTimeoutEnabled is off). A renewal that
// finds the hold gone ends it at once; a new connection of the given
// client (a restart, a failover), seen in its pool statistics, starts a
// renewal of every hold within a watchdog tick.
//
// The one fault no lock service can cover is a paused holder (a GC pause,
// SIGSTOP, a VM migration): its ctx is cancelled on time, but the code it
// runs may not look before it acts. Storage that checks a fencing token is
// the answer.
//
// # Waiting
//
// An acquisition tries once; on contention it subscribes to the lock's
// Redisson channel through the Client's one pub/sub connection, tries
// again, then sleeps until an unlock message wakes it or the holder's lease
// would have run out. One unlock wakes one waiter (a semaphore's release,
// as many as permits came free; a wake-up for fewer permits than its waiter
// needs goes on to the next waiter). A lock freed without a
// message (its key deleted, flushed or expired) wakes its waiters too: the
// hub tracks the keys waited for with CLIENT TRACKING (on Redis Cluster
// with sharded pub/sub, on each key's master; not with classic pub/sub
// there). An uncontended acquire and release cost exactly one round trip
// each.
//
// Within one Client, the last release of a reentrant lock hands it to the
// Client's longest waiter in the release's own script call when no other
// client listens on the lock's channel (Redis counts the subscribers: on
// Redis Cluster only with sharded pub/sub, whose channel lives on the
// lock's master; with classic pub/sub there releases publish): the
// waiter holds the lock one round trip after the release started, and
// sends nothing. A goroutine that comes while the Client's own goroutines
// already wait for the lock queues behind them without a try of its own,
// so under contention in one process an acquisition costs one call: the
// release that hands it over. When waiters of other processes are
// subscribed too, and all of them are lockgen Clients, the release grants
// the lock to the longest waiting lockgen waiter of any process (a queue
// of lockgen's own beside the RLock layout) and wakes that process only;
// as soon as anyone else listens (a Redisson waiter), releases publish as
// Redisson's do, so no one is overtaken. A fair lock's release grants the
// lock to the head of the queue, in whatever process it waits, when the
// head is a lockgen waiter, and tells it on its own channel; a Redisson
// head is woken as Redisson wakes it. Options.NoHandoff turns all of
// these off.
//
// # Failures
//
// Releases run detached from the caller's ctx with Options.ReleaseTimeout,
// are resent on transport errors and refusals (BUSY, LOADING, READONLY,
// OOM, NOREPLICAS, MISCONF, a slot moving) and are idempotent (a resend never counts down
// twice). A release Redis refused until ReleaseTimeout is ErrUnavailable;
// one without a reply, or whose resend found the hold gone after a copy
// went unanswered, is ErrOutcomeUnknown; either way the Client releases
// what Redis still has of the hold in the background once Redis answers
// (not a plain semaphore's permits, which have no owner: its Release that
// returned ErrUnavailable did not run, and may be called again). An
// acquire whose reply is lost is settled: it either took
// the lock, and the caller holds it, or it is marked aborted on the server.
// The scripts get both without writing anything per request: they are
// sent the hold count the owner has before the call, and one owner's calls
// on one lock take turns, so a resent copy finds the count already moved
// and does nothing. When an outcome stays unknown (ErrOutcomeUnknown), the
// owner's next call on that lock first re-reads its count in Redis and
// gives back what a lost request took, so a retry is never mistaken for a
// resend. On Redis Cluster, a call that fails without a reply has the
// Client's cluster clients re-read the slot map at once (package calls), so
// that after a failover renewals, waiters, releases and settlements reach
// the promoted replica within a few hundred milliseconds, not at go-redis'
// next periodic reload (every 10 s by default). Errors are *LockError
// values wrapping the sentinels of this package.
//
// # Redis layout
//
// Keys, hash fields, channels and messages are Redisson's: a Java service
// using RLock and a Go service using Mutex on the same key exclude and wake
// each other.
package runtime
