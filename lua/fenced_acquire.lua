-- fenced_acquire: take or re-enter a fenced reentrant lock (Redisson
-- RFencedLock layout): RLock's hash, plus a token counter that every
-- successful acquisition, re-entry included, increments.
--
-- Runs after count.lua (lua.go prefixes it) and applies the same hold-count
-- rule as acquire.lua, through its parts, because a resend must not count
-- twice in the token either: a resend whose first copy took the lock
-- returns the counter as it stands (no one else can have incremented it
-- while this owner holds the lock), a re-entry or a new acquisition
-- increments it. The INCR is in this call, so a fenced acquire is still one
-- command on the wire.
--
-- KEYS[1]  lock hash: field = owner token, value = hold count
-- KEYS[2]  request marker of this attempt (see acquire.lua)
-- KEYS[3]  token counter: redisson_lock_token:{<lock>} (a string holding a
--          decimal integer, no TTL, never reset)
-- ARGV[1]  lease in milliseconds (never shortens the hash's TTL on a
--          re-entry or a resend)
-- ARGV[2]  owner token
-- ARGV[3]  the owner's hold count before this request (0: a new acquisition)
-- ARGV[4]  marker lifetime in milliseconds
--
-- Returns an array
--   {0, token}  the lock is held by ARGV[2]; token is this acquisition's
--               fencing token (>= 1)
--   {ttl}       not taken: ttl as acquire.lua returns it (> 0 the holder's
--               remaining lease in ms, -1 no expiry, -3 aborted, -6 the
--               hold a re-entry counts on is gone)
local lease = tonumber(ARGV[1])
local verdict, v = lockgen_classify(KEYS[1], ARGV[2], tonumber(ARGV[3]), KEYS[2])
if verdict == 'resend' then
    lockgen_resent(KEYS[1], KEYS[2], ARGV[4], lease, nil, v)
    return {0, tonumber(redis.call('get', KEYS[3])) or 0}
end
if verdict == 'reenter' then
    lockgen_reenter(KEYS[1], ARGV[2], lease, nil)
    return {0, redis.call('incr', KEYS[3])}
end
if verdict ~= 'new' then
    return {verdict}
end
if v == -2 then
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], lease)
    return {0, redis.call('incr', KEYS[3])}
end
if v == 0 then
    return {1}
end
return {v}
