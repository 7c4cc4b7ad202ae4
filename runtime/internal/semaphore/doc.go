// Package semaphore is the engine behind runtime's counters: the two
// semaphores and the count-down latch. Sem is runtime.Semaphore's: a
// permit-expirable semaphore with Redisson RPermitExpirableSemaphore's
// layout (design.md §8): the free count at the key, the held permits in
// the sorted set {key}:timeout (member: a 16-byte permit id, score: its
// expiry in epoch ms), the channel redisson_sc:{key}. The handle validates
// its arguments, calls a Sem and reports the events; the tries, the
// settlement of a lost reply, releases, the count's changes, late replies
// and the give-back of permits lost at their deadline are here.
//
// Plain (plain.go) is runtime.PlainSemaphore's, in the layout of
// Redisson's RSemaphore: the same count and channel, no permit ids and no
// leases, so nothing of it is resent and a lost reply is an unknown
// outcome; a late reply that took permits gives them back.
//
// Latch (latch.go) is runtime.Latch's, in the layout of Redisson's
// RCountDownLatch (design.md §8): the count at the key, no TTL, armed
// only when absent, deleted by the count-down that reaches zero. It is a
// counter like Plain's, changed by scripts sent once and waited on in the
// wait loop, without holds: the two share the reading of the count and
// the rule for a lost reply (sentOnce).
//
// It works through the Client's lockenv.Env (the Redis clients, the hold
// registry, the wait loop, the call limits, the settler); its errors are
// made by Env.Fail (runtime's *LockError). It owns no state of its own:
// a Sem or a Plain is a value made per handle.
//
// Invariants:
//
//   - (Sem) a permit id is never reused: a try settled as not taken marks its
//     request done (its marker refuses every copy), and the next try is
//     a new request with new ids;
//   - an acquire whose reply is lost is settled before the call returns:
//     the permits are held, or no copy of the request will ever take them;
//   - a release, a give-back or a late reply's give-back is resent until
//     Redis answers: a resend finds the ids gone and frees nothing twice;
//     adding to the count is never resent (a lost reply is an unknown
//     outcome), setting it may be;
//   - a hold's ctx is done before its release is sent;
//   - (Latch) only an explicit arm creates the count; a count-down or a
//     late waiter never re-arms it, and a waiter checks the count before
//     it sleeps and after every wake-up, so a release published before it
//     subscribed, or while its connection was down, is never missed.
package semaphore
