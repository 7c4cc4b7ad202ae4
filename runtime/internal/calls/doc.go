// Package calls bounds the calls that must finish after their caller gave
// up, and follows a Redis Cluster's failovers for them.
//
// Limits runs a release or a settlement on a ctx detached from its
// caller's cancellation, ending at the Client's ReleaseTimeout or at the
// bound of the call it is part of, whichever comes first, and sends it
// again while Redis does not answer (a retried op must be idempotent).
// SlotMaps has the cluster clients re-read their slot maps when a call
// failed without a reply.
//
// Invariants:
//
//   - a call made through Limits returns by its limit, with
//     errs.OutcomeUnknown wrapping the last transport error when Redis
//     never answered; a release (RetryRelease) or an op sent once
//     (ResendRefused) whose every attempt was refused before it ran, or
//     never sent, ends with errs.Unavailable instead: it did not run;
//   - an op that must not run twice is sent again only after a refusal
//     (scripts.Refused) or a send that never left (ResendRefused);
//   - Redis' replies, errors included, end the retries: a resend would not
//     change them;
//   - the Client's own background work (StayAttached) is not detached:
//     it ends with Close.
package calls
