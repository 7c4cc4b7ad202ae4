-- acquire: take or re-enter a reentrant lock (Redisson RLock layout).
--
-- Runs after count.lua (lua.go prefixes it): the hold-count rule, resends,
-- re-entries and request markers are decided there. The client sends the
-- hold count its owner has before this request (its acquire and release
-- calls on one lock run one at a time). That tells a new acquisition from
-- a resent copy of one that already ran (the count is then one higher), so
-- the hot path writes nothing but the lock itself.
--
-- KEYS[1]  lock hash: field = owner token, value = hold count
-- KEYS[2]  request marker of this attempt: lockgen_latch:{<lock>}:<request id>.
--          Absent on the hot path. "abort" once settle.lua settled the
--          attempt as not taken; "took" once the attempt is known to have
--          taken the lock (settled, or a resend found its first copy done).
--          Either way no later copy of the request takes the lock again.
-- ARGV[1]  lease in milliseconds (PEXPIRE of the hash; a re-entry or a
--          resend never shortens the hash's TTL)
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
local lease = tonumber(ARGV[1])
local reply, ttl = lockgen_count(KEYS[1], ARGV[2], tonumber(ARGV[3]), KEYS[2], ARGV[4], lease)
if reply then
    return reply
end
if ttl == -2 then
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], lease)
    return 0
end
if ttl == 0 then
    return 1
end
return ttl
