// Package other is not the package named in the spec.
package other
