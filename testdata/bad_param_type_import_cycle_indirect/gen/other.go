// Package gen is the output package, which mid imports.
package gen

// X is what mid uses of gen.
const X = 1
