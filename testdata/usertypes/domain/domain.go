// Package domain holds the user-defined key types of the usertypes golden
// case: one of each way a type can become key text.
package domain

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// OrderID has an integer underlying type.
type OrderID int64

// SKU has a string underlying type.
type SKU string

// Status is an integer enum with a String method: rendered as its number.
type Status uint8

func (s Status) String() string { return "status-" + strconv.Itoa(int(s)) }

// Region is a struct with a String method.
type Region struct{ Name string }

func (r Region) String() string { return r.Name }

// Point is a struct with a MarshalText method only.
type Point struct{ X, Y int }

// MarshalText renders the point as X,Y.
func (p *Point) MarshalText() ([]byte, error) {
	if p.X < 0 {
		return nil, errors.New("negative x")
	}
	return []byte(strconv.Itoa(p.X) + "," + strconv.Itoa(p.Y)), nil
}

// Money cannot be a key: a struct with neither String nor MarshalText.
type Money struct{ Cents int64 }

// Flag has a bool underlying type.
type Flag bool

// The types below cannot be keys although they have a String method:
// their text is time.Time's, or may be nil.

// Instant is time.Time under an alias.
type Instant = time.Time

// Stamp promotes time.Time's String.
type Stamp struct{ time.Time }

// Ref promotes the String of an embedded interface.
type Ref struct{ fmt.Stringer }

// Code has a String method on its pointer; CodeRef is that pointer.
type Code struct{ N int }

func (c *Code) String() string { return strconv.Itoa(c.N) }

// CodeRef is a pointer, nil or not.
type CodeRef = *Code

// Boxed promotes Region's String through an embedded pointer.
type Boxed struct{ *Region }
