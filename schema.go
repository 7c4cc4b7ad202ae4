package lockgen

// locks.schema.json at the repository's root is Schema, for editors that
// load it by URL; TestCommittedSchemaIsCurrent keeps it equal.
//
//go:generate go run ./cmd/lockgen schema -o locks.schema.json
