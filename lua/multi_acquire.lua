-- multi_acquire: take several reentrant locks all-or-nothing, in one call
-- (the members of a multi-lock that share one cluster slot).
--
-- KEYS     for each member i: KEYS[2i-1] its lock hash, KEYS[2i] this
--          attempt's request latch on it (see settle.lua)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner token
-- ARGV[3]  request id of this attempt
-- ARGV[4]  latch lifetime in milliseconds
--
-- Returns an array {i, ttl}
--   {0, 0}     every member is now held by ARGV[2] (taken or re-entered;
--              a resend of this request never counts twice)
--   {i, ttl}   nothing taken: member i is held by someone else for ttl ms
--              more (-1: no expiry); the caller waits on member i
--   {0, -3}    nothing taken: this request was settled as aborted
local n = #KEYS / 2
local seen = redis.call('get', KEYS[2])
if seen == ARGV[3] then
    return {0, 0}
end
if seen == 'abort:' .. ARGV[3] then
    return {0, -3}
end
for i = 1, n do
    local key = KEYS[2 * i - 1]
    if redis.call('exists', key) == 1 and redis.call('hexists', key, ARGV[2]) == 0 then
        local ttl = redis.call('pttl', key)
        if ttl == 0 then
            ttl = 1
        end
        return {i, ttl}
    end
end
for i = 1, n do
    redis.call('hincrby', KEYS[2 * i - 1], ARGV[2], 1)
    redis.call('pexpire', KEYS[2 * i - 1], ARGV[1])
    redis.call('set', KEYS[2 * i], ARGV[3], 'px', ARGV[4])
end
return {0, 0}
