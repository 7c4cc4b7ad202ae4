// Package x is internal to other/, so gen/ may not import it.
package x

// ID is a string key type.
type ID string
