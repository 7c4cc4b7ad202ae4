package mutex

import "github.com/lockgen/lockgen/internal/redisnames"

// Key and channel names follow Redisson's helpers exactly (package
// redisnames), so that Redisson and lockgen find the same keys and
// channels for the same lock name, and every key of one lock hashes to
// the same cluster slot.

// prefixName is Redisson's prefixName: "p:{name}", or "p:name" when name
// already carries a hash tag.
func prefixName(prefix, name string) string { return redisnames.Prefix(prefix, name) }

// suffixName is Redisson's suffixName: "{name}:s", or "name:s" when name
// already carries a hash tag.
func suffixName(name, suffix string) string { return redisnames.Suffix(name, suffix) }

// LockChannel is the channel a reentrant lock publishes its unlock message on.
func LockChannel(key string) string { return prefixName("redisson_lock__channel", key) }

// RequestMarker names the marker key of one acquire request. The scripts
// write it only off the hot path: when a lost reply is settled (settle.lua),
// or when a resent copy finds its first copy done. It makes the outcome of
// that request final, so no copy of it arriving later takes the lock. One
// key per request: a later request of the same owner can never overwrite
// the proof an earlier one still needs.
func RequestMarker(key, requestID string) string {
	return redisnames.PrefixWith("lockgen_latch", key, requestID)
}
