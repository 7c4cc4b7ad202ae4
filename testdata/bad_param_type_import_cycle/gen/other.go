// Package gen is the output package, which domain imports.
package gen

// X is what domain uses of gen.
const X = 1
