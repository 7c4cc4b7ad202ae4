// Package mutex is the engine behind runtime's Mutex handles: the
// reentrant lock (Client.Mutex, FencedLock), the fair lock, the two sides
// of a read-write lock, and the atomic multi-lock (Multi), in Redisson's
// layouts. A handle validates its arguments, calls a Lock and reports the
// events it returns; everything between the call and Redis is here: the
// tries, waiting (an await.Spec), replica sync, releases and the
// hand-offs and grants they make, and the settlement of unknown outcomes
// and late replies (docs/architecture.md maps the files).
//
// It works through Env (the Client's lockenv.Env and the engine's state
// per Client). runtime's *LockError and Event reach it only through
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
//   - a hold's ctx is done before its release is sent: no other owner can
//     be granted the lock while it still runs;
//   - a waiter is handed a lock by a release of its Client only when it
//     is parked with an owner of its own, and it never tries while an
//     offer to it is in flight.
package mutex
