// Package gen is the output package, which domain's internal test imports.
package gen

// X is what domain's test uses of gen.
const X = 1
