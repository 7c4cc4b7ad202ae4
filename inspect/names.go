package inspect

import (
	"strconv"

	"github.com/lockgen/lockgen/internal/redisnames"
)

// Redisson's name helpers (design.md §4), as the runtime applies them:
// inspect must find exactly the keys the runtime and Redisson write.

func prefixName(prefix, name string) string { return redisnames.Prefix(prefix, name) }
func suffixName(name, suffix string) string { return redisnames.Suffix(name, suffix) }

// The keys of each kind besides the lock key itself.
func fairQueue(key string) string    { return prefixName("redisson_lock_queue", key) }
func fairTimeouts(key string) string { return prefixName("redisson_lock_timeout", key) }
func rwWriters(key string) string    { return prefixName("lockgen_rwlock_writers", key) }
func fenceToken(key string) string   { return prefixName("redisson_lock_token", key) }
func fairWaiters(key string) string  { return prefixName("lockgen_fair_waiters", key) }
func grantQueue(key string) string   { return prefixName("lockgen_lock_queue", key) }
func grantRecords(key string) string { return prefixName("lockgen_lock_grants", key) }
func permitTimeouts(key string) string {
	return suffixName(key, "timeout")
}
func readTimeoutKey(key, owner string, n int64) string {
	return suffixName(key, owner) + ":rwlock_timeout:" + strconv.FormatInt(n, 10)
}

// The channels waiters sleep on, by kind (a fair lock's waiters each have
// their own).
func lockChannel(key string) string      { return prefixName("redisson_lock__channel", key) }
func rwChannel(key string) string        { return prefixName("redisson_rwlock", key) }
func semaphoreChannel(key string) string { return prefixName("redisson_sc", key) }
func latchChannel(key string) string {
	return "redisson_countdownlatch__channel__{" + key + "}" // braces always added
}

func formatInt(n int64) string { return strconv.FormatInt(n, 10) }
