// Package leaseclock is the lease clock: the one place where a hold's
// deadline is computed and enforced (design.md §7). It does no I/O and
// knows nothing of Redis, locks or contexts.
//
// A hold's deadline is the send time of its last confirmed request plus
// that request's lease, minus Drift, the max over its confirmations
// (Term). Only a reply that proves the hold confirms it, and the send
// time is read before the request leaves, so whatever the network did,
// Redis expires the key no earlier than the deadline plus drift.
//
// A Queue keeps items by deadline and publishes its earliest for the
// Clock to read without the queue's lock. The Clock is one goroutine that
// sleeps until the earliest deadline of any queue and has the due items
// ended, under the queue's lock, by the caller: it either finds the
// deadline moved (a confirmation came: the item is put back, one heap
// operation per lease, not per renewal) or ends the hold. No renewal
// round, retry, pool wait or socket read can delay it.
//
// Invariants:
//
//   - a Term's Valid never moves back, and once passed never moves again
//     (a late confirmation does not revive a hold the clock is ending);
//   - an item on a Queue is ended no earlier than its Term's Valid, and no
//     later than that plus the Clock's scheduling delay (it wakes for a
//     new earliest deadline, and sleeps at most Horizon);
//   - deadlines are kept and compared on the monotonic clock (Nanos), as
//     Go's timers and Redis' TTLs run: a wall clock step moves none;
//   - Queue and Term are guarded by the caller's lock (the registry shard's
//     mutex); Queue.Head and the Clock are safe without it.
package leaseclock
