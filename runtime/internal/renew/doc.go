// Package renew is the watchdog's plan: when each watchdog hold is
// renewed, and how the holds due together are cut into calls. It does no
// I/O; the watchdog sends the calls it plans.
//
// A watchdog hold is renewed one Period (WatchdogTimeout/3) after the send
// time of its last confirmed renewal or acquisition. Holds are kept on a
// Wheel (one per registry shard, under its mutex) by the Tick their
// renewal is due in, so a round costs nothing per hold not due. Holds due
// within a quarter period after a tick fill up its last call: renewing a
// little early costs nothing, a call for a handful of holds does.
//
// An Admission is the gate of new acquisitions on one node (the server,
// or a cluster master: the watchdog keeps one per node): while the
// watchdog's backlog there (how long ago the oldest renewal to it without
// a reply was due) is over CloseLag (a quarter period, at least 50 ms but
// never more than a period), fresh acquisitions of its keys wait in it,
// each within its own wait, and releases of its keys wait a little
// (calls.Limits.Yield): held locks come before new ones and before freed
// ones.
//
// Invariants:
//
//   - the wheel skips an entry whose hold was rescheduled to a later tick;
//     one rescheduled earlier leaves its old entry looking due (TakeDue
//     takes what is due by an entry's tick, since Put puts an item due in
//     a tick already taken off in the next one), so a hold can be offered
//     twice: the owner's take refuses a hold in flight, so no hold is in
//     two renewals at once;
//   - a confirmed renewal keeps the hold's phase (one call per period),
//     but the next renewal is never more than 5/4 of a period after the
//     send it follows, so early renewals cannot push renewals towards the
//     deadline (3 periods);
//   - a batch holds at most maxKeys keys, all of one cluster slot when
//     keys are grouped by slot; a call (Calls) then serves one slot, so
//     one node: the watchdog bounds the calls in flight per node, and a
//     node that does not answer holds up only its own holds;
//   - a closed Admission opens only for a backlog under OpenLag, half of
//     CloseLag, and a waiter never waits past the limit it passes, or its
//     ctx.
package renew
