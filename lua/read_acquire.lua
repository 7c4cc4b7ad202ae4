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
-- KEYS[1]  lock hash
-- KEYS[2]  timeout key of the new hold: {<lock>}:<owner>:rwlock_timeout:<n>
-- KEYS[3]  request latch of this attempt (see settle.lua)
-- KEYS[4]  waiting writers: lockgen_rwlock_writers:{<lock>} (zset field -> deadline ms)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner token (the read field)
-- ARGV[3]  "<owner>:write" (the owner's write field, for downgrade)
-- ARGV[4]  request id of this attempt
-- ARGV[5]  latch lifetime in milliseconds
-- ARGV[6]  "1": writers first; "0": Redisson's order (readers may barge)
--
-- Returns an integer
--   0    the read hold is taken (or this request already took it)
--   > 0  not taken: sleep at most this many ms
--   -1   not taken: the holder's key has no expiry
--   -3   not taken: this request was settled as aborted
--   -5   not taken: the lock is free, but a waiting writer goes first
--        (writers first): the writer is the one to wake
local seen = redis.call('get', KEYS[3])
if seen == ARGV[4] then
    return 0
end
if seen == 'abort:' .. ARGV[4] then
    return -3
end
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

local function take()
    local n = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('set', KEYS[2], n, 'px', lease)
    if redis.call('pttl', KEYS[1]) < lease then
        redis.call('pexpire', KEYS[1], lease)
    end
    redis.call('set', KEYS[3], ARGV[4], 'px', ARGV[5])
    return 0
end

local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
    if writerWaits() then
        return -5
    end
    redis.call('hset', KEYS[1], 'mode', 'read')
    return take()
end
if mode == 'write' then
    if redis.call('hexists', KEYS[1], ARGV[3]) == 1 then
        return take()
    end
else
    if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
        return take()
    end
    if not writerWaits() then
        return take()
    end
end
local ttl = redis.call('pttl', KEYS[1])
if ttl == 0 then
    return 1
end
return ttl
