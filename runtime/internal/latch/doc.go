// Package latch is the engine behind runtime's Latch: a count-down latch
// with Redisson RCountDownLatch's layout (design.md §8): the count at the
// key (a decimal integer, no TTL), the channel
// redisson_countdownlatch__channel__{key}, whose "0" says the count
// reached zero. The handle validates its arguments and calls a Latch; the
// script calls and the wait are here, over the Client's lockenv.Env. It
// takes no holds and owns no state: a Latch is a value made per handle.
//
// Invariants:
//
//   - only an explicit arm (TrySet) creates the count, and only when it is
//     absent; the count-down that reaches zero deletes it and publishes
//     "0", so a late waiter or count-down never re-arms it;
//   - arming and counting down are sent once (not resent by go-redis
//     either): a count-down whose reply is lost is errs.OutcomeUnknown;
//   - a waiter checks the count before it sleeps and after every wake-up
//     (the wait loop's, package await), so a release published before it
//     subscribed, or while its connection was down, is never missed.
package latch
