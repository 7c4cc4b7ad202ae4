-- write_acquire: take or re-enter the write hold of a read-write lock.
--
-- KEYS[1]  lock hash (see read_acquire.lua)
-- KEYS[2]  request latch of this attempt (see settle.lua)
-- KEYS[3]  waiting writers: lockgen_rwlock_writers:{<lock>}
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  "<owner>:write" (the write field)
-- ARGV[3]  owner token (its read field: a reader asking to write is an upgrade)
-- ARGV[4]  request id of this attempt
-- ARGV[5]  latch lifetime in milliseconds
-- ARGV[6]  "1": writers first and waiting: record this writer as waiting
-- ARGV[7]  how long a waiting writer's record lives without a refresh, ms
--
-- Returns an integer
--   0    the write hold is taken (or this request already took it)
--   > 0  not taken: sleep at most this many ms
--   -1   not taken: the holder's key has no expiry
--   -3   not taken: this request was settled as aborted
--   -4   refused: the owner holds a read hold (upgrade would deadlock)
local seen = redis.call('get', KEYS[2])
if seen == ARGV[4] then
    return 0
end
if seen == 'abort:' .. ARGV[4] then
    return -3
end
local lease = tonumber(ARGV[1])
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
    redis.call('hset', KEYS[1], 'mode', 'write')
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], lease)
    redis.call('zrem', KEYS[3], ARGV[2])
    redis.call('set', KEYS[2], ARGV[4], 'px', ARGV[5])
    return 0
end
if mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    if redis.call('pttl', KEYS[1]) < lease then
        redis.call('pexpire', KEYS[1], lease)
    end
    redis.call('set', KEYS[2], ARGV[4], 'px', ARGV[5])
    return 0
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 1 then
    return -4
end
if ARGV[6] == '1' then
    local t = redis.call('time')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    redis.call('zadd', KEYS[3], now + tonumber(ARGV[7]), ARGV[2])
end
local ttl = redis.call('pttl', KEYS[1])
if ttl == 0 then
    return 1
end
return ttl
