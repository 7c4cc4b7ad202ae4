// Package domain builds without gen; only its internal test imports it.
package domain

// OrderID is a string key type.
type OrderID string
