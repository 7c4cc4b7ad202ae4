// Package redisnames holds Redisson's key-name helpers (design.md §4), so
// that the runtime, which writes the keys, and lockgen inspect, which reads
// them, build exactly the same names as each other and as Redisson.
package redisnames

import "strings"

// Prefix is Redisson's prefixName: "p:{name}", or "p:name" when name
// already carries a hash tag.
func Prefix(prefix, name string) string {
	if strings.Contains(name, "{") {
		return prefix + ":" + name
	}
	return prefix + ":{" + name + "}"
}

// Suffix is Redisson's suffixName: "{name}:s", or "name:s" when name
// already carries a hash tag.
func Suffix(name, suffix string) string {
	if strings.Contains(name, "{") {
		return name + ":" + suffix
	}
	return "{" + name + "}:" + suffix
}

// PrefixWith is Prefix(prefix, name) + ":" + tail, built in one
// allocation.
func PrefixWith(prefix, name, tail string) string {
	if strings.Contains(name, "{") {
		return prefix + ":" + name + ":" + tail
	}
	return prefix + ":{" + name + "}:" + tail
}
