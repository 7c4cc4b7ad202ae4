package runtime_test

import "github.com/lockgen/lockgen/internal/runtimetest"

// skipShortOutsideCI: see runtimetest.SkipShortOutsideCI.
var skipShortOutsideCI = runtimetest.SkipShortOutsideCI
