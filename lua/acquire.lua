-- acquire: take or re-enter a reentrant lock (Redisson RLock layout).
--
-- The client sends the hold count its owner has before this request (its
-- acquire and release calls on one lock run one at a time). That tells a
-- new acquisition from a resent copy of one that already ran (the count is
-- then one higher), so the hot path writes nothing but the lock itself.
--
-- KEYS[1]  lock hash: field = owner token, value = hold count
-- KEYS[2]  request marker of this attempt: lockgen_latch:{<lock>}:<request id>.
--          Absent on the hot path. "abort" once settle.lua settled the
--          attempt as not taken; "took" once the attempt is known to have
--          taken the lock (settled, or a resend found its first copy done).
--          Either way no later copy of the request takes the lock again.
-- ARGV[1]  lease in milliseconds (PEXPIRE of the hash)
-- ARGV[2]  owner token
-- ARGV[3]  the owner's hold count before this request (0: a new acquisition)
-- ARGV[4]  marker lifetime in milliseconds
--
-- Returns an integer (never nil: a nil reply costs the client an error path)
--   0    the lock is now held by ARGV[2] (taken, re-entered, or taken by an
--        earlier copy of this very request: a resend never counts twice)
--   > 0  not taken: the remaining lease of the current holder in ms (>= 1)
--   -1   not taken: the holder's key has no expiry
--   -3   not taken: the request was settled as aborted, or it is a late
--        copy of a request whose hold has ended since
--   -6   not taken: the owner's hold count in Redis is not ARGV[3] (the
--        hold a re-entry counts on is gone: its lease ran out or the key
--        was deleted)
local expected = tonumber(ARGV[3])
if expected == 0 and redis.call('exists', KEYS[1], KEYS[2]) == 0 then
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return 0
end
local n = tonumber(redis.call('hget', KEYS[1], ARGV[2])) or 0
if n == expected + 1 then
    -- An earlier copy of this request took it: count it once, and make
    -- sure no copy arriving after the hold ended takes the lock again.
    redis.call('set', KEYS[2], 'took', 'nx', 'px', ARGV[4])
    return 0
end
if n > 0 and n == expected then
    if redis.call('exists', KEYS[2]) == 1 then
        return -3
    end
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return 0
end
if n > 0 or expected > 0 then
    return -6
end
-- A new acquisition that found the lock or its own marker.
local ttl = redis.call('pttl', KEYS[1])
if ttl == -2 then
    return -3
end
if ttl == 0 then
    return 1
end
return ttl
