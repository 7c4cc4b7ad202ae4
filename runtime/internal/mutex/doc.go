// Package mutex is the engine behind runtime's Mutex handles: the
// reentrant lock (Client.Mutex, FencedLock), the fair lock and the two
// sides of a read-write lock, with Redisson's layouts (design.md §4). A
// handle validates its arguments, calls a Lock and reports the events it
// returns; everything between the call and Redis is here.
//
// What it owns:
//
//   - the kinds (kind.go, fair.go, rwlock.go, fence.go): a Kind's hash
//     field that proves a hold, the channel its waiters sleep on, how they
//     wait and what a waiter leaves in Redis (methods of Kind), and its
//     scripts (the kind interface: five script bindings per flavour);
//   - one acquisition (Lock.Acquire, Acquiring): its tries in the owner's
//     turn, how it waits (an await.Spec and the three interfaces of
//     package await it implements), replica sync, and the record of the
//     hold it took (Acquiring.Record);
//   - releases (Lock.Release), and the hand-offs and grants a release
//     makes: to a waiter of the same Client (handoff.go, with the hub's
//     Offer/Settle/Unpark), to the head of the lockgen queue of any
//     process (grant.go, grant_next.lua), to the head of a fair queue
//     (fair_next.lua); and a waiter's claim of what it was handed;
//   - settlement of unknown outcomes (reconcile.go): the settlement of a
//     lost reply, the owner's count re-read before its next call, the
//     settlement that goes on in the background, the late replies of
//     calls abandoned at their deadline, and the give-back of a hold lost
//     at its deadline (the registry's holds.Taker).
//
// What it does not own: the hold registry and its turns (package holds),
// waiting and waking (await, hub), bounded and retried calls (calls), the
// background queue (settle), renewal (watchdog), and the public names:
// runtime's *LockError and Event reach it only through the two functions
// of lockenv.Env it is given (Fail, WaitStarted), so nothing here imports
// runtime.
//
// It also holds the engine of an atomic multi-lock (Multi, multi.go):
// reentrant members in one slot taken and released by one script call,
// whose tries, settlement and late replies are the Lock's, member by
// member.
//
// It works through Env: the Client's parts (lockenv.Env, shared with the
// other kinds' engines) and the state the engine keeps per Client
// (whether the server refused hand-offs, the grant streaks).
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
//     be granted the lock while it still runs (design.md §7);
//   - a waiter is handed a lock by a release of its Client only when it
//     is parked with an owner of its own, and it never tries while an
//     offer to it is in flight.
package mutex
