// Package watchdog renews a Client's watchdog holds: one loop per Client,
// ticking at the registry's tick, takes the holds due (package holds keeps
// them on its renewal wheel), cuts them into RenewBatch calls of at most
// lua.MaxBatch keys of one slot (package renew plans them) and sends them
// by node: each call, a pipeline on its own connection, goes at once to
// its node's lane (lanes.go: one server, or its slot's master), whose few
// workers send it or queue it, so a slow node holds up only the holds it
// serves. It also measures how far each node's renewals run behind
// (lanes.go), which drives that node's admission gate (Gate: the gate of
// a key's node), and rewrites the Client's owner label every period
// (label.go). It knows nothing of lock kinds: a hold is a key, a field
// and maybe extra keys.
//
// Invariants:
//
//   - a renewal call runs under a ctx that ends at the earliest deadline of
//     its holds, on a client that honours ctx deadlines (DeadlineClient):
//     no renewal reaches Redis after its holder was told the hold is gone;
//     holds with less than a period left are sent in calls of their own,
//     so they cannot cut short the calls of holds with time, and among
//     them a call serves holds with at most twice its earliest's time left
//     (holds.ByTimeLeft); a hold out of time is not sent;
//   - a renewal only reports to the registry (confirmed, gone, or
//     unconfirmed): the lease clock, not the watchdog, ends a hold's ctx;
//   - the script renews a key only while its field names the owner, and
//     never shortens a lease (renew_batch.lua);
//   - at most Workers calls are in flight to one node (a server, a cluster
//     master); a node's other calls wait in its lane, in the order the
//     rounds sent them, and the round goes on with the other nodes' calls:
//     it never waits for a worker, so a node that does not answer delays
//     no other node's renewals. The age of a call waiting in a lane counts
//     in its node's backlog, which closes that node's gate for fresh
//     acquisitions of its keys (held locks first), no other node's, and
//     never releases a hold;
//   - a new connection of the caller's client (a restart, a failover) makes
//     the next round renew every hold, at most once per CloseLag
//     (renew.Timing: a quarter period, at least 50 ms, at most a period),
//     so a server that forgot them is found within a tick.
//
// The planning is tested without Redis in package renew; the loop against
// real servers here, in package runtime and in internal/runtimetest.
package watchdog
