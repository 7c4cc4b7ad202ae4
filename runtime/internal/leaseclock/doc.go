// Package leaseclock is the lease clock: the one place where a hold's deadline
// is computed and enforced (design.md §7). It does no I/O and knows nothing
// of Redis, locks or contexts.
//
// A hold's deadline is the send time of its last confirmed request plus
// that request's lease, minus Drift; it is the max over every confirmation
// the hold had, so it only moves forward (Term). Only a reply that proves
// the hold confirms it, and the send time is read before the request
// leaves, so whatever the network did, Redis expires the key no earlier
// than the deadline plus drift.
//
// A Queue keeps items by deadline (a 4-ary min-heap whose slots carry
// their deadlines, so sifting reads no item; a released item is marked
// off and its slot dropped later, at the head or when dead slots outnumber
// live ones) and publishes its earliest
// deadline for a Clock to read without the queue's lock. The Clock is one
// goroutine that sleeps until the earliest deadline of any queue and then
// has the due items ended. Ending is the caller's: it runs under the
// queue's lock, where the caller either finds the deadline moved (a
// confirmation came meanwhile: the item is put back for the new one, one
// heap operation per lease, not per renewal) or ends the hold. No renewal
// round, retry, pool wait or socket read can delay it.
//
// Invariants:
//
//   - a Term's Valid never moves back, and once its deadline has passed it
//     never moves again (a late confirmation does not revive a hold the
//     clock is about to end);
//   - an item on a Queue is ended no earlier than its Term's Valid, and no
//     later than that plus the Clock's scheduling delay (the Clock wakes
//     for a new earliest deadline; its longest sleep is Horizon);
//   - deadlines are kept and compared on the monotonic clock (Nanos), as
//     Go's timers and Redis' TTLs run: a step of the wall clock moves none;
//   - Queue and Term are guarded by the caller's lock (the registry shard's
//     mutex); Queue.Head and the Clock are safe without it.
package leaseclock
