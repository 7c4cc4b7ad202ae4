// An internal test (package domain) that imports the output package:
// once the generated file imports domain, go test of domain is a cycle.
// (ext_test.go comes first in the directory and is passed over.)
package domain

import (
	"testing"

	"github.com/lockgen/lockgen/testdata/bad_param_internal_test_imports_output/gen"
)

func TestX(t *testing.T) { _ = gen.X }
