package mutex

import (
	"github.com/lockgen/lockgen/internal/redisnames"
)

// LockChannel is the channel a reentrant lock publishes its unlock message
// on. Names follow Redisson's helpers (package redisnames), so that both
// find the same keys and channels, all in the lock's cluster slot.
func LockChannel(key string) string { return redisnames.Prefix("redisson_lock__channel", key) }
