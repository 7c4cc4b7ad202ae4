-- semaphore_try_set: set the free count of a semaphore only when it is
-- absent (Redisson trySetPermits, for RSemaphore and
-- RPermitExpirableSemaphore alike), and announce it.
--
-- KEYS[1]  free count
-- KEYS[2]  channel: redisson_sc:{<name>}
-- ARGV[1]  permits (>= 0)
-- ARGV[2]  publish command: "publish", or "spublish" on a sharded cluster
--
-- Returns 1 when the count was set (and published), 0 when it existed.
if redis.call('exists', KEYS[1]) == 1 then
    return 0
end
redis.call('set', KEYS[1], ARGV[1])
redis.pcall(ARGV[2], KEYS[2], ARGV[1])
return 1
