-- semaphore_drain: take every free permit of a permit-expirable semaphore
-- at once (Redisson drainPermits), after reclaiming the expired ones
-- (reclaim.lua, prefixed by lua.go). The permits drained belong to no one:
-- AddPermits gives them back.
--
-- KEYS[1]  free count
-- KEYS[2]  held permits: {<name>}:timeout
-- KEYS[3]  channel: redisson_sc:{<name>}
-- ARGV[1]  publish command: "publish", or "spublish" on a sharded cluster
-- ARGV[2]  "drain" sets the free count to 0 and returns what it was;
--          "read" changes nothing but the reclaim and returns it
--          (Available)
--
-- Returns the free count before a drain (0 when absent), or the count read.
local now = lockgen_now()
lockgen_reclaim(KEYS[1], KEYS[2], KEYS[3], ARGV[1], now)
local value = tonumber(redis.call('get', KEYS[1])) or 0
if ARGV[2] == 'drain' and redis.call('exists', KEYS[1]) == 1 then
    redis.call('set', KEYS[1], 0)
end
return value
