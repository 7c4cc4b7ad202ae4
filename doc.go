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
//	           -> Output.Write (temp file + rename, only when bytes changed,
//	              and only over a file lockgen generated)
//
// Errors are reported as an ErrorList, one line per problem:
//
//	locks.yaml:12:7: locks.PaymentLock.lease: "30" is not a duration (add a unit: 30s or 30ms)
//
// The shape of a spec is declared once (shape.go) as a JSON Schema in Go:
// Schema is that schema, Parse checks every spec against it besides its
// own rules, and docs/spec.md is generated from its descriptions.
//
// The output file stays inside the spec's module, and lockgen replaces only
// a file that starts with its generated-code header; names the generated
// file would declare that the output package already declares are spec
// errors that point at both places.
//
// The generated code calls github.com/lockgen/lockgen/runtime; lockgen
// itself never talks to Redis. The cmd/lockgen command is a thin wrapper
// over Generate, Output.Write and Output.Diff.
package lockgen
