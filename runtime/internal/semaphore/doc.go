// Package semaphore is the engine behind runtime's counters, in Redisson's
// layouts. Sem is runtime.Semaphore's (RPermitExpirableSemaphore: the
// free count at the key, the held permits in the sorted set {key}:timeout,
// member a 16-byte permit id, score its expiry in epoch ms, the channel
// redisson_sc:{key}); Plain is runtime.PlainSemaphore's (RSemaphore: the
// same count and channel, no permit ids, no leases); Latch is
// runtime.Latch's (RCountDownLatch: the count at the key, no TTL). Each is
// a value made per handle, with no state of its own.
//
// Invariants:
//
//   - (Sem) a permit id is never reused: a try settled as not taken marks its
//     request done (its marker refuses every copy), and the next try is
//     a new request with new ids;
//   - an acquire whose reply is lost is settled before the call returns:
//     the permits are held, or no copy of the request will ever take them
//     (Plain: the outcome is unknown, and a late reply that took permits
//     gives them back);
//   - a release, a give-back or a late reply's give-back is resent until
//     Redis answers: a resend finds the ids gone and frees nothing twice
//     (after a copy without a reply, an unknown outcome, not a loss); a
//     release still refused or unanswered at ReleaseTimeout is given back
//     by the settler;
//     adding to a count (Plain's release too) or counting a latch down
//     is never resent after a lost reply (an unknown outcome), only after
//     a refusal before it ran, within ReleaseTimeout; setting it may be;
//   - a hold's ctx is done before its release is sent;
//   - (Latch) only an explicit arm creates the count; a count-down or a
//     late waiter never re-arms it, and a waiter checks the count before
//     it sleeps and after every wake-up, so a release published before it
//     subscribed, or while its connection was down, is never missed.
package semaphore
