// Package watchdog renews a Client's watchdog holds: one loop per Client,
// ticking at the registry's tick, that takes the holds due (package holds
// keeps them on its renewal wheel), cuts them into batched RenewBatch
// script calls (package renew plans the batches) and sends them from a few
// workers, each call bounded by the earliest deadline it serves.
//
// It owns the loop, its workers, the measure of how far renewals run
// behind (overload.go) and the admission gate that measure drives, and the
// Client's owner label, rewritten every period (label.go). It knows
// nothing of lock kinds: a hold is a key, a field and maybe extra keys.
//
// Invariants:
//
//   - a renewal call runs under a ctx that ends at the earliest deadline of
//     the holds it serves, on a client that honours ctx deadlines
//     (DeadlineClient): no renewal reaches Redis after its holder was told
//     the hold is gone; holds with less than a period left (their
//     renewals failed) are sent in calls of their own, so that they cannot
//     cut short the calls of holds that still have time, and among them
//     a call serves holds with at most twice the time left of its
//     earliest (holds.ByTimeLeft); a hold out of time is not sent;
//   - a renewal only reports to the registry (confirmed, gone, or
//     unconfirmed): it never ends a hold's ctx itself, the lease clock
//     does, at the deadline;
//   - the script renews a key only while its field names the owner, and
//     never shortens a lease (renew_batch.lua);
//   - at most Workers calls are in flight; a round that finds every worker
//     busy waits for one, and that wait counts in the backlog, which closes
//     the gate for fresh acquisitions (held locks first) and never releases
//     a hold;
//   - a new connection of the caller's client (a restart, a failover) makes
//     the next round renew every hold at once, at most once per poke
//     interval, so a server that forgot them is found within a tick.
//
// Tests: the planning is tested without Redis in package renew; the loop's
// behaviour against real servers (renewal, loss, overload, failover) in
// package runtime and internal/runtimetest.
package watchdog
