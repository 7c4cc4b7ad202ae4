// An external test may import the output package: no cycle.
package domain_test

import (
	"testing"

	"github.com/lockgen/lockgen/testdata/bad_param_internal_test_imports_output/gen"
)

func TestY(t *testing.T) { _ = gen.X }
