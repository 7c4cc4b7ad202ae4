// Package lockenv is what every lock engine of a Client works through:
// Env, the Client's parts, built once by runtime.NewClient, and the few
// rules every kind shares (owner tokens, request markers, validation,
// recording holds, which replies decided an outcome). runtime's public
// names reach it only through Env.Fail and Env.WaitStarted, so nothing
// here imports runtime.
//
// Invariants:
//
//   - the exported fields of an Env are set before its first use and
//     never changed, but the counters Acquiring and Resolving (atomics,
//     moved by acquisitions and abandoned calls); owner tokens and
//     request ids never repeat within a Client (atomic sequences after
//     its uuid);
//   - a warning of one kind (its message) is written at most once per
//     10 s (Warn); the next one counts those left out;
//   - a fixed-lease hold's ctx ends with a cause wrapping errs.LockLost
//     when its lease runs out (AddHold).
package lockenv
