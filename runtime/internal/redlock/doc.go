// Package redlock is the engine behind runtime's RedLock: the RedLock
// algorithm over independent Redis masters (design.md §6). On every node
// the lock is a reentrant lock (a mutex.Lock in that node's Client: its
// tries, releases, renewal and loss are the Mutex's), taken by every node
// with the same owner token. The handle validates its arguments, calls a
// Lock and reports the events; the rounds of tries, the quorum, the
// waiting between rounds and the hold over the parts are here.
//
// It works through the Client's lockenv.Env (owner tokens, the registry
// that tells a re-entry, Close, Fail) and each node Client's mutex.Env;
// it owns no state of its own beyond a hold's: a Lock is a value made
// per handle, a hold lives in the ctx it returns.
//
// Invariants:
//
//   - a round tries every node once, in parallel, with one owner token;
//     a round that did not win is released on every node it took before
//     anything else happens;
//   - a hold is handed out only while a quorum granted it and its
//     validity (a lease − drift, leaseclock.Drift, after the earliest
//     send of a granted node's try) is ahead; fewer than a quorum of answers ends the call with errs.Quorum,
//     a wait never turns that into errs.NotAcquired;
//   - between rounds a waiter backs off a random 1–20 ms after a split
//     vote, and otherwise sleeps on the lock's channel of every node
//     (package hub, one waiter per node) up to sleepBound; a round after a
//     join that found a channel subscribed already runs at once;
//   - a hold's ctx ends with errs.LockLost once more parts are lost than
//     the quorum can spare, or when a fixed lease's validity ends; it is
//     done before the releases of the parts are sent.
package redlock
