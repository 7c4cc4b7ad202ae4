// Package templates holds the jennifer emitters that turn a validated lock
// model into Go source: file.go writes the file frame (header, imports, the
// Locks type and New), key.go writes the key functions, methods.go the
// handle constructor, With helper and options pieces every kind shares,
// value.go the doc lines that point at runtime.Value (a value back from a
// hold), and one file per lock kind (reentrant.go, fair.go, readwrite.go,
// multi.go, red.go, fenced.go, semaphore.go, latch.go) assembles that
// kind's declarations, returning jen.Code.
//
// The package knows nothing about YAML. Its input, File, is built by the
// lockgen package from a spec that has already been validated and whose
// param types have been resolved, so the emitters do not fail on user
// input; Emit returns an error only when the model breaks that contract.
//
// Generated code depends on github.com/lockgen/lockgen/runtime and the
// standard library only, renders keys with strconv and string
// concatenation (never fmt), and is deterministic: the same File renders
// the same bytes.
package templates
