-- plain_semaphore_release: give back n permits of a plain semaphore
-- (Redisson RSemaphore layout) and announce the new free count.
--
-- Not idempotent (RSemaphore has no permit ids): the caller never resends
-- it after a lost reply.
--
-- KEYS[1]  free count
-- KEYS[2]  channel: redisson_sc:{<name>}
-- ARGV[1]  n (>= 1)
-- ARGV[2]  publish command: "publish", or "spublish" on a sharded cluster
--
-- Returns the new free count, which is also the payload published (it
-- wakes that many waiters).
local value = redis.call('incrby', KEYS[1], ARGV[1])
redis.pcall(ARGV[2], KEYS[2], value)
return value
