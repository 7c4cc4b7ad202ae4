package mutex

import "github.com/lockgen/lockgen/internal/redisnames"

// A fair lock has RFairLock's layout (the hash, its queue and its
// waiters' timeouts); lockgen adds its own waiters' records beside it.

func fairQueue(key string) string    { return redisnames.Prefix("redisson_lock_queue", key) }
func fairTimeouts(key string) string { return redisnames.Prefix("redisson_lock_timeout", key) }

// fairWaiters records lockgen's waiters in the queue with their liveness
// deadlines: it tells them from Redisson's (fair_acquire.lua). fairGrants
// holds those that take grants, with their lease.
func fairWaiters(key string) string { return redisnames.Prefix("lockgen_fair_waiters", key) }
func fairGrants(key string) string  { return redisnames.Prefix("lockgen_fair_grants", key) }
