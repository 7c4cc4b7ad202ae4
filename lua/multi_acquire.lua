-- multi_acquire: take several reentrant locks all-or-nothing, in one call
-- (the members of a multi-lock that share one cluster slot).
--
-- Counts as acquire.lua does, per member: the client sends the owner's
-- hold count of each member before the request, so a resent copy is told
-- from a new request without a latch per request.
--
-- KEYS     KEYS[1..n] the members' lock hashes; KEYS[n+1] the request
--          marker of this attempt on the first member (see acquire.lua)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner token
-- ARGV[3]  marker lifetime in milliseconds
-- ARGV[3+i] the owner's hold count of member i before this request
--
-- Returns an array {i, ttl}
--   {0, 0}     every member is now held by ARGV[2] (taken or re-entered,
--              or taken by an earlier copy of this very request)
--   {i, ttl}   nothing taken: member i is held by someone else for ttl ms
--              more (-1: no expiry); the caller waits on member i
--   {0, -3}    nothing taken: the request was settled as aborted, or it is
--              a late copy of a request whose holds have changed since
--   {i, -6}    nothing taken: the owner's hold count of member i in Redis
--              is not the one sent (the hold a re-entry counts on is gone)
local n = #KEYS - 1
local marker = KEYS[n + 1]
local held = {}
local ran = true
for i = 1, n do
    held[i] = tonumber(redis.call('hget', KEYS[i], ARGV[2])) or 0
    if held[i] ~= tonumber(ARGV[3 + i]) + 1 then
        ran = false
    end
end
if ran then
    -- An earlier copy of this request took every member: count it once.
    redis.call('set', marker, 'took', 'nx', 'px', ARGV[3])
    return {0, 0}
end
if redis.call('exists', marker) == 1 then
    return {0, -3}
end
for i = 1, n do
    local expected = tonumber(ARGV[3 + i])
    if held[i] ~= expected then
        return {i, -6}
    end
    if expected == 0 and redis.call('exists', KEYS[i]) == 1 then
        local ttl = redis.call('pttl', KEYS[i])
        if ttl == 0 then
            ttl = 1
        end
        return {i, ttl}
    end
end
for i = 1, n do
    redis.call('hincrby', KEYS[i], ARGV[2], 1)
    redis.call('pexpire', KEYS[i], ARGV[1])
end
return {0, 0}
