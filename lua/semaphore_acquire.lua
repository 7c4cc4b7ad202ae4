-- semaphore_acquire: take n permits of a permit-expirable semaphore
-- (Redisson RPermitExpirableSemaphore layout), after reclaiming the
-- expired ones (reclaim.lua, prefixed by lua.go).
--
-- KEYS[1]  free count: a string holding a decimal integer, at the name
-- KEYS[2]  held permits: a sorted set at {<name>}:timeout, member = permit
--          id (16 random bytes, raw), score = the permit's expiry in epoch ms
-- KEYS[3]  channel: redisson_sc:{<name>}
-- KEYS[4]  request marker of this attempt: lockgen_latch:{<name>}:<hex of
--          the first id>; "abort" once semaphore_settle.lua settled it as
--          not taken or semaphore_release.lua gave its permits back
-- ARGV[1]  lease in milliseconds: each permit's score is now + lease
-- ARGV[2]  publish command: "publish", or "spublish" on a sharded cluster
-- ARGV[3]  the permits a fresh semaphore starts with: when the free count is
--          absent it is set to this minus the permits held (never below 0);
--          0 leaves an absent count absent (nothing can be taken then)
-- ARGV[4]  the permit ids, concatenated: n = len / 16 permits
--
-- Returns
--   0    taken: the free count went down by n and every id is held; or
--        an earlier copy of this very request took them (its first id is
--        held), and this copy changes nothing: a resend never counts twice
--   > 0  not taken: ms until the nearest held permit expires (a waiter
--        tries again then, since a crashed holder publishes nothing)
--   -1   not taken, and no held permit will expire (wait for a release)
--   -3   not taken: the attempt was settled as aborted
local ids = ARGV[4]
local n = #ids / 16
if redis.call('exists', KEYS[4]) == 1 then
    return -3
end
if redis.call('zscore', KEYS[2], string.sub(ids, 1, 16)) then
    return 0
end
local now = lockgen_now()
lockgen_reclaim(KEYS[1], KEYS[2], KEYS[3], ARGV[2], now)
local value = redis.call('get', KEYS[1])
if value == false and tonumber(ARGV[3]) > 0 then
    value = math.max(tonumber(ARGV[3]) - redis.call('zcard', KEYS[2]), 0)
    redis.call('set', KEYS[1], value)
end
if value ~= false and tonumber(value) >= n then
    redis.call('decrby', KEYS[1], n)
    local expiry = now + tonumber(ARGV[1])
    for i = 1, #ids, 16 do
        redis.call('zadd', KEYS[2], expiry, string.sub(ids, i, i + 15))
    end
    return 0
end
local nearest = lockgen_nearest(KEYS[2])
if nearest == nil or nearest >= 922337203685477 then
    return -1
end
return math.max(nearest - now, 1)
