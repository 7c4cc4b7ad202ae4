-- acquire: take or re-enter a reentrant lock (Redisson RLock layout).
--
-- KEYS[1]  lock hash: field = owner token, value = hold count
-- KEYS[2]  request latch of this attempt: lockgen_latch:{<lock>}:<request id>
--          holds the request id once this attempt took the lock, or
--          "abort:<id>" once it was settled as not taken (one key per
--          request: no later request can overwrite what this one proves)
-- ARGV[1]  lease in milliseconds (PEXPIRE of the hash)
-- ARGV[2]  owner token "<client uuid>:<n>"
-- ARGV[3]  request id of this attempt (unique per attempt, reused by resends)
-- ARGV[4]  latch lifetime in milliseconds
--
-- Returns an integer (never nil: a nil reply costs the client an error path)
--   0    the lock is now held by ARGV[2] (taken, re-entered, or this very
--        request had already taken it: a resend never counts twice)
--   > 0  not taken: the remaining lease of the current holder in ms (>= 1)
--   -1   not taken: the holder's key has no expiry
--   -3   not taken: this request was settled as aborted by settle.lua
local seen = redis.call('get', KEYS[2])
if seen == ARGV[3] then
    return 0
end
if seen == 'abort:' .. ARGV[3] then
    return -3
end
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    redis.call('set', KEYS[2], ARGV[3], 'px', ARGV[4])
    return 0
end
local ttl = redis.call('pttl', KEYS[1])
if ttl == 0 then
    return 1
end
return ttl
