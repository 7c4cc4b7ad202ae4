package mutex

import (
	"github.com/lockgen/lockgen/internal/redisnames"
)

// Key and channel names follow Redisson's helpers exactly (package
// redisnames), so that Redisson and lockgen find the same keys and
// channels for the same lock name, and every key of one lock hashes to
// the same cluster slot.

// LockChannel is the channel a reentrant lock publishes its unlock message on.
func LockChannel(key string) string { return redisnames.Prefix("redisson_lock__channel", key) }
