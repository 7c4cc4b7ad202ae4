// Package domain imports the output package gen: importing domain from
// the generated file would close a cycle.
package domain

import "github.com/lockgen/lockgen/testdata/bad_param_type_import_cycle/gen"

var _ = gen.X

// OrderID is a string key type.
type OrderID string
