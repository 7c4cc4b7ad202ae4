// Package mutex is the engine behind runtime's Mutex handles (the
// reentrant, fenced and fair locks, the sides of a read-write lock) and
// atomic multi-locks, in Redisson's layouts: everything between a
// handle's call and Redis (docs/architecture.md maps the files). It works
// through Env; runtime's errors and events reach it only through
// lockenv.Env's Fail and WaitStarted, so nothing here imports runtime.
//
// Invariants:
//
//   - every script call of an owner on a lock is made in the owner's turn
//     (holds.Registry.Enter/Exit), with the hold count the client expects:
//     that count is what tells a resent request from a new one;
//   - a successful try, hand-off or grant claim keeps the turn until
//     Record has recorded the hold, so the owner's next call reads a count
//     that includes it;
//   - an acquire whose reply is lost is settled before the call returns
//     (it took the lock, or a request marker makes sure it never will),
//     and when even that is lost, the outcome is marked unknown and the
//     owner's next call re-reads its count first;
//   - a hold (key, field) is of one lock, Same as the handle that took it
//     (holds.Hold.From): only that lock's scripts re-enter and release it,
//     and its owner takes no other kind on the key but a read-write lock's
//     read side under the write side (Lock.checkReentry);
//   - a hold's ctx is done before its release is sent: no other owner can
//     be granted the lock while it still runs;
//   - a last release that Redis refused or did not answer within its
//     ReleaseTimeout is marked unknown and handed to the settler, which
//     gives back what Redis still has of the hold once it answers; one
//     whose resend found the hold gone after a copy without a reply is an
//     unknown outcome, not a loss;
//   - a waiter is handed a lock by a release of its Client only when it
//     is parked with an owner of its own, and it never tries while an
//     offer to it is in flight.
package mutex
