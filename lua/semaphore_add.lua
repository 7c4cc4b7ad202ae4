-- semaphore_add: change the free count of a permit-expirable semaphore by
-- a delta (AddPermits), or set the total (SetPermits), after reclaiming the
-- expired permits (reclaim.lua, prefixed by lua.go).
--
-- KEYS[1]  free count
-- KEYS[2]  held permits: {<name>}:timeout
-- KEYS[3]  channel: redisson_sc:{<name>}
-- ARGV[1]  publish command: "publish", or "spublish" on a sharded cluster
-- ARGV[2]  "add": ARGV[3] is a delta (may be negative) to the free count;
--          "set": ARGV[3] is the total, so the free count becomes that
--          minus the permits held now (it may go negative: holders give
--          back before anyone takes again)
-- ARGV[3]  the number
--
-- Returns the new free count; it is published when > 0 (waking that many
-- waiters).
local now = lockgen_now()
lockgen_reclaim(KEYS[1], KEYS[2], KEYS[3], ARGV[1], now)
local value
if ARGV[2] == 'set' then
    value = tonumber(ARGV[3]) - redis.call('zcard', KEYS[2])
    redis.call('set', KEYS[1], value)
else
    value = redis.call('incrby', KEYS[1], ARGV[3])
end
if value > 0 then
    redis.pcall(ARGV[1], KEYS[3], value)
end
return value
