// Package domain imports the output package gen through mid: importing
// domain from the generated file would close a cycle of three packages.
package domain

import "github.com/lockgen/lockgen/testdata/bad_param_type_import_cycle_indirect/mid"

var _ = mid.Y

// OrderID is a string key type.
type OrderID string
