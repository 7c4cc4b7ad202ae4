// Package calls bounds the calls that must finish after their caller gave
// up, and follows a Redis Cluster's failovers for them.
//
// Limits runs a release or a settlement on a ctx detached from its
// caller's cancellation, ending at the Client's ReleaseTimeout or at the
// bound of the call it is part of (scripts.WithCallBound), whichever comes
// first, and sends it again while Redis does not answer. What a retry may
// repeat must be idempotent: the scripts' expected hold counts and request
// markers make a resend harmless.
//
// SlotMaps is told of every call that failed without a reply: on a
// cluster the node may be dead and its slots served by a promoted replica,
// so each of the Client's cluster clients re-reads its slot map at once,
// and once more when the failures stop (see slots.go).
//
// Invariants:
//
//   - a call made through Limits returns by its limit, with
//     errs.OutcomeUnknown wrapping the last transport error when Redis
//     never answered;
//   - Redis' replies, errors included, end the retries: a resend would not
//     change them;
//   - the Client's own background work (StayAttached) is not detached:
//     it ends with Close.
package calls
