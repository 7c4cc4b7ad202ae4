// Package hub is where the runtime's waiters sleep: the table of the
// pub/sub channels waited on, the Waiters on each, and the connections
// that carry the subscriptions. Messages become signals in memory, by the
// channel's wake Mode. The hub never tries a lock, runs no script and
// knows nothing of holds; of owners it keeps a waiter's owner token and
// lease argument, to offer it a release's lock and match a grant to it
// (offer.go), and of package scripts it uses the reply tests and KeySlot.
// Package runtime builds one Hub per Client, with the pub/sub flavour
// ChooseSharded picks as Redisson does (flavour.go).
//
// # What a waiter may rely on
//
//   - No lost wake-up. Join registers a waiter, subscribing if no one
//     waits on the channel yet. If it reports ready, a message published
//     since the caller's last try may have reached no one: the caller
//     tries again at once; otherwise the server's confirmation signals it.
//     Attach registers a waiter before its first try, and only on a
//     confirmed subscription, so a message during that try reaches it.
//   - None wasted. A waiter reports each try with Tried. One that leaves
//     with a wake-up it has not used up (pending, or woken and its try not
//     reported) passes it to the next waiter if it gave up, and drops it if
//     it acquired; Tried with handOn passes a used one on. On a
//     semaphore's channel a wake-up for fewer permits than its waiter
//     needs (Need) goes on to the next waiter its message did not wake,
//     each woken once per message, so free permits reach a waiter they
//     serve.
//   - FIFO within a client. An unlock wakes the longest waiter (exclusive
//     before readers). A newcomer (Attach with fifo) where this client has
//     waiters lets a hand-off go first, so a goroutine that unlocked and
//     locks again does not take the lock from the waiter its unlock wakes:
//     while a woken waiter still tries (InFlight) it waits, HandoffWait at
//     most; else UnlockGrace for an unlock message on its way. It never
//     sleeps on what another waiter saw of the lock.
//   - A dead connection wakes its waiters: a connection that fails or is
//     found half-open is replaced, its channels subscribed again and its
//     waiters signalled (conn.go); so are the channels of a cluster slot
//     that moved to another master, on that master (route.go); a key
//     gone without a message wakes its lock's longest waiter, and a key
//     granted to that waiter without one wakes it (key tracking,
//     track.go).
//   - An offer is settled. A parked waiter may be offered the lock by a
//     release of the same client (Offer); Unpark waits for the outcome the
//     releaser reports with Settle. A grant made in Redis comes out of
//     Unpark as OfferRemote.
//
// After Close, Join and Attach return no waiter.
//
// # Locks
//
// The channel table is cut in shards by channel, each under its own mutex:
// waiters on unrelated locks never contend, and no I/O runs under them.
// The connections, their queues and their health are under links.mu. Lock
// order: a shard's mutex, then links.mu; code holding links.mu never takes a
// shard's mutex (it returns what is to be woken, and the caller wakes it
// after unlocking). Each tracker's mutex is a leaf.
//
// # What it owns
//
// Every Waiter (pooled: Leave takes it back); the pub/sub connections
// (one, or with sharded pub/sub on a cluster one per master: route.go) and
// their goroutines (a writer, a reader and, where tracking works, a key
// tracker each; one health monitor; on such a cluster the router that
// places channels on their master's connection); the timers that
// unsubscribe a channel a while after its last waiter left; and the
// go-redis clients it builds from the caller's options (track.go). Close
// ends them all. The caller's client is only read from.
package hub
