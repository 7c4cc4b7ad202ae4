// Package await is the waiting protocol every lock kind shares: try, and
// while someone else holds the lock, sleep in the hub until a wake-up, the
// holder's TTL, the end of the wait or the caller's ctx, then try again.
//
// A kind says how it waits with a Spec (a value) and a Try (one attempt);
// waiters a release may hand the lock to, or queued in Redis for grants,
// say so through Handee and Queuer. The Loop owns no lock state and sends
// nothing to Redis itself: every command is the kind's Try (or Claim).
//
// Invariants:
//
//   - a waiter tries before it sleeps, except behind this Client's own
//     waiters: a FIFO newcomer there first waits for an unlock in transit
//     or a hand-off in flight (hub.HandoffWait at most), and one a release
//     can hand the lock to skips its first try and sleeps up to
//     skippedTryBound; a sleep after a try is bounded by the holder's TTL
//     that try returned, never another's;
//   - a wake-up published while a waiter tries is not missed (Await,
//     steps 1 and 3);
//   - a try is never started on a done ctx, so a cancelled wait sends
//     nothing more;
//   - a call returns by its bound: the end of its wait plus a round trip
//     (LastTryGrace), the caller's own bound (Spec.Until), or, for a single
//     try, Loop.SingleTry. Every try runs under a ctx that ends there and
//     carries it (scripts.WithCallBound), so what a try does detached ends
//     there too;
//   - while Redis does not answer, or refuses for a state that passes
//     (scripts.Refused: a slot half moved, a failover), a waiter tries
//     again with a backoff until its bound, and then reports
//     errs.Unavailable, not errs.NotAcquired, unless Redis answered an
//     earlier try (no refusal since) and only the last ran out of time:
//     then the lock was held, as far as anyone knows (errs.NotAcquired).
package await
