// Package redlock is the engine behind runtime's RedLock: the RedLock
// algorithm over independent Redis masters. On every node the lock is a
// reentrant mutex.Lock in that node's Client (its tries, releases, renewal
// and loss are the Mutex's), taken with one owner token. Here are the
// rounds of tries, the quorum, the waiting between rounds and the hold
// over the parts, which lives in the ctx Acquire returns.
//
// Invariants:
//
//   - a round tries every node once, in parallel, with one owner token;
//     a round that did not win is released on every node it took before
//     anything else happens;
//   - a round does not wait on a minority of slow nodes: once a quorum
//     granted, the others are waited for until half the validity is
//     spent, and a round that can no longer win ends once a quorum
//     answered; a try still running then gives back what it takes when it
//     ends (nothing the round did not count is left locked);
//   - a hold is handed out only while a quorum granted it and its
//     validity (a lease − drift, leaseclock.Drift, after the earliest
//     send of a granted node's try) is ahead; fewer than a quorum of
//     answers in the last round of a wait ends the call with errs.Quorum,
//     or with errs.NotAcquired when a quorum answered an earlier round
//     (the lock was held, as far as anyone knows) and no node failed for
//     a reason that does not pass;
//   - between rounds a waiter backs off a random 1–20 ms after a split
//     vote, as package await's waiters do (10 ms doubling to 250 ms)
//     after a round with fewer than a quorum of answers, and otherwise
//     sleeps on the lock's channel of every node (package hub, one waiter
//     per node) up to Lock.SleepBound (default SleepBound); a round after
//     a join that found a channel subscribed already runs at once;
//   - a hold's ctx ends with errs.LockLost once more parts are lost than
//     the quorum can spare, or when a fixed lease's validity ends; it is
//     done before the releases of the parts are sent.
package redlock
