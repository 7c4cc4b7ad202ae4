// Package lockgen turns a locks.yaml declaration into type-safe Go helpers
// for distributed locks on Redis.
//
// The pipeline runs one way:
//
//	locks.yaml -> Parse (yaml.v3 nodes, every value keeps line:col)
//	           -> validation (every error in one run, each with a fix)
//	           -> Spec (the validated model)
//	           -> Render (param types and the output package resolved with
//	              go/packages, code emitted by the templates package)
//	           -> Output.Write (temp file + rename, only when bytes changed)
//
// Errors are reported as an ErrorList, one line per problem:
//
//	locks.yaml:12:7: locks.PaymentLock.lease: "30" is not a duration (add a unit: 30s or 30ms)
//
// The generated code calls github.com/lockgen/lockgen/runtime; lockgen
// itself never talks to Redis. The cmd/lockgen command is a thin wrapper
// over Generate, Output.Write and Output.Diff.
package lockgen
