// Package lockotel records lockgen's lock events as OpenTelemetry metrics
// and traces. It is its own module, so that lockgen's runtime does not
// depend on OpenTelemetry: wire it in with
//
//	obs, err := lockotel.New(lockotel.Options{})   // the global providers
//	c, err := runtime.NewClient(rdb, &runtime.Options{Observer: obs})
//
// # Metrics
//
// Every lock metric has the attributes lock.name (the name in locks.yaml)
// and lock.kind (reentrant, fair, read, write, multi, red, semaphore; a
// fenced lock records reentrant, a readwrite lock read or write by side,
// and a latch, awaited rather than held, records nothing); those with an
// outcome also have lock.outcome.
//
//	lockgen.lock.wait.duration       histogram  s            time from the call to the hold or the failure (outcome)
//	lockgen.lock.hold.duration       histogram  s            time from the hold to its release
//	lockgen.lock.acquisitions        counter    {acquisition} holds taken
//	lockgen.lock.waits               counter    {wait}       acquisitions that found the lock taken and waited
//	lockgen.lock.failures            counter    {failure}    acquisitions given up, by outcome
//	lockgen.lock.losses              counter    {loss}       holds lost before their release
//	lockgen.watchdog.rounds          counter    {round}      renewal calls, by outcome (ok, error)
//	lockgen.watchdog.round.duration  histogram  s            time of one renewal call
//	lockgen.watchdog.renewals        histogram  {renewal}    holds renewed by one call
//
// The outcomes: acquired, not_acquired (the wait time ran out),
// ctx_done (the caller's ctx ended), quorum (a RedLock reached too few
// nodes), closed (the Client was closed) and error (anything else: Redis
// errors, a lost re-entry, an upgrade refused).
//
// # Traces
//
// Each acquisition, wait included, is a span "lockgen.acquire" under the
// caller's span (the ctx given to Lock, TryLock or Do), with lock.name,
// lock.kind, lock.key and lock.outcome. With Options.HoldSpans each hold
// is also a span "lockgen.hold", from the acquisition to the release; a
// lost hold ends its span with an event "lockgen.lock_lost" and an error
// status.
package lockotel
