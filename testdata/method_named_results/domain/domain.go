// Package domain holds key types whose String and MarshalText methods
// name their results, which are the same methods.
package domain

// Code has String with a named result.
type Code struct{ N int }

func (c Code) String() (s string) { return "code" }

// Tag has MarshalText with named results.
type Tag struct{ N int }

// MarshalText renders the tag.
func (t Tag) MarshalText() (text []byte, err error) { return []byte("tag"), nil }
