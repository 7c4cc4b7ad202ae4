// Package mid imports the output package gen.
package mid

import "github.com/lockgen/lockgen/testdata/bad_param_type_import_cycle_indirect/gen"

// Y is what domain uses of mid.
const Y = gen.X
