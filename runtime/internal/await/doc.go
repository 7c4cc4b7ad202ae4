// Package await is the waiting protocol every lock kind shares: try, and
// while someone else holds the lock, sleep in the hub until a wake-up, the
// holder's TTL, the end of the wait or the caller's ctx, then try again.
//
// A kind says how it waits with a Spec (a value) and a Try (one attempt);
// the waiters that a release may hand the lock to, or that are queued in
// Redis for grants, say so through the small Handee and Queuer
// interfaces. The Loop runs the wait and returns when the lock is taken
// or the wait is over; it owns no lock state of its own, and sends
// nothing to Redis itself: every command is the kind's Try (or Claim).
//
// Invariants:
//
//   - a waiter always tries before it sleeps, and never sleeps on what
//     another waiter saw of the lock: its sleep is bounded by the holder's
//     TTL its own latest try returned;
//   - a wake-up published while a waiter tries is not missed: a waiter on
//     a channel that is subscribed already registers before its first
//     try, and one that joins after a try tries again at once when the
//     subscription came up meanwhile;
//   - a try is never started on a done ctx, so a cancelled wait sends
//     nothing more;
//   - a call returns by its bound: the end of its wait plus a round trip
//     (LastTryGrace), the caller's own bound (Spec.Until), or, for a single
//     try, Loop.SingleTry. Every try runs under a ctx that ends there and
//     carries it (scripts.WithCallBound), so what a try does detached ends
//     there too;
//   - while Redis does not answer, a waiter tries again with a backoff
//     until its bound, and then reports errs.Unavailable, not
//     errs.NotAcquired.
package await
