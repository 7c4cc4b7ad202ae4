-- read_acquire: take or re-enter a read hold of a read-write lock (Redisson
-- RReadWriteLock layout).
--
-- The hash at the lock key has field "mode" = "read" | "write", one field
-- per read owner (its read hold count) and, for the writer,
-- "<owner>:write". Each read hold n of an owner also has its own key
-- "{<lock>}:<owner>:rwlock_timeout:<n>" with the hold's lease, so one dead
-- reader does not keep the lock alive on the others' renewals.
--
-- A writer may take read holds (downgrade). With writers first, a reader
-- that does not already hold the lock waits while a live writer waits
-- (an entry in the writer-intent set that has not timed out).
--
-- Runs after count.lua (lua.go prefixes it): counts as acquire.lua does;
-- the client sends the owner's read hold count before the request, so a
-- resent copy is told from a new request without a latch per request.
--
-- KEYS[1]  lock hash
-- KEYS[2]  timeout key of the new hold: {<lock>}:<owner>:rwlock_timeout:<n>
--          with n = ARGV[4] + 1; SET to n with the lease when the hold is
--          taken, its lease re-applied (never shortened) by a resend
-- KEYS[3]  request marker of this attempt (see acquire.lua)
-- KEYS[4]  waiting writers: lockgen_rwlock_writers:{<lock>} (zset field -> deadline ms)
-- ARGV[1]  lease in milliseconds (the hash's TTL is never shortened)
-- ARGV[2]  owner token (the read field)
-- ARGV[3]  "<owner>:write" (the owner's write field, for downgrade)
-- ARGV[4]  the owner's read hold count before this request (0: new)
-- ARGV[5]  marker lifetime in milliseconds
-- ARGV[6]  "1": writers first; "0": Redisson's order (readers may barge)
--
-- Returns an integer
--   0    the read hold is taken (re-entered, or taken by an earlier copy of
--        this very request)
--   > 0  not taken: sleep at most this many ms
--   -1   not taken: the holder's key has no expiry
--   -3   not taken: the request was settled as aborted, or it is a late
--        copy of a request whose hold has ended since
--   -5   not taken: the lock is free, but a waiting writer goes first
--        (writers first): the writer is the one to wake
--   -6   not taken: the owner's read hold count in Redis is not ARGV[4]
local lease = tonumber(ARGV[1])

-- A waiting writer blocks new readers (writers first), unless the reader
-- re-enters or is the writer itself: blocking those would deadlock.
local function writerWaits()
    if ARGV[6] ~= '1' then
        return false
    end
    local t = redis.call('time')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    redis.call('zremrangebyscore', KEYS[4], '-inf', now)
    return redis.call('zcard', KEYS[4]) > 0
end

local reply, ttl = lockgen_count(KEYS[1], ARGV[2], tonumber(ARGV[4]), KEYS[3], ARGV[5], lease, KEYS[2])
if reply then
    return reply
end
-- A new read hold (count.lua). Joining a held lock counts from 0 the way
-- a re-entry counts on (lockgen_reenter).
if ttl == -2 then
    if writerWaits() then
        return -5
    end
    redis.call('hset', KEYS[1], 'mode', 'read', ARGV[2], 1)
    redis.call('set', KEYS[2], 1, 'px', lease)
    redis.call('pexpire', KEYS[1], lease)
    return 0
end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == 'write' then
    if redis.call('hexists', KEYS[1], ARGV[3]) == 1 then
        lockgen_reenter(KEYS[1], ARGV[2], lease, KEYS[2]) -- the writer takes read holds (downgrade)
        return 0
    end
elseif not writerWaits() then
    lockgen_reenter(KEYS[1], ARGV[2], lease, KEYS[2])
    return 0
end
if ttl == 0 then
    return 1
end
return ttl
