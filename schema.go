package lockgen

import _ "embed"

// Schema is the JSON Schema of locks.yaml, for editor completion:
//
//	# yaml-language-server: $schema=https://raw.githubusercontent.com/lockgen/lockgen/main/locks.schema.json
//
// It is kept in sync with the parser's fields by a test.
//
//go:embed locks.schema.json
var Schema []byte
