// Package renew is the watchdog's plan: when each watchdog hold is
// renewed, and how the holds due together are cut into calls. It does no
// I/O; the runtime sends the calls it plans and reports the replies.
//
// A watchdog hold is renewed one Period (WatchdogTimeout/3) after the send
// time of its last confirmed renewal or acquisition. Holds are kept on a
// Wheel by the Tick their renewal is due in (each registry shard has its
// own, under its own mutex), so a renewal round costs nothing per hold
// that is not due. Holds due in one tick, and those due within a quarter
// of a period after it, share their calls: renewing a little early costs
// nothing, a call for a handful of holds does.
//
// An Admission is the gate of new acquisitions: the watchdog tells it its
// backlog (how long ago the oldest renewal without a reply was due), and
// while that is more than a quarter of a period it is closed and fresh
// acquisitions wait in it, each at most within its own wait, and releases
// wait in it a little (calls.Limits.Yield); held locks come before new
// ones and before freed ones.
//
// Invariants:
//
//   - a hold is taken off the wheel at most once per scheduling (an entry
//     whose hold was rescheduled since is stale and skipped);
//   - a confirmed renewal keeps the hold's phase (calls stay one per
//     period), but the next renewal is never more than 5/4 of a period
//     after the send it follows, so early renewals cannot push renewals
//     towards the deadline (3 periods);
//   - a batch holds at most MaxKeys keys, all of one cluster slot when
//     the keys are grouped by slot; a call (Calls) serves one slot;
//   - a closed Admission opens only for a backlog under half the one that
//     closed it (OpenLag, CloseLag), and a waiter never waits past the
//     limit it passes, or its ctx.
package renew
