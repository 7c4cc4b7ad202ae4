-- write_acquire: take or re-enter the write hold of a read-write lock.
--
-- Runs after count.lua (lua.go prefixes it): counts as acquire.lua does;
-- the client sends the owner's write hold count before the request, so a
-- resent copy is told from a new request without a latch per request.
--
-- KEYS[1]  lock hash (see read_acquire.lua)
-- KEYS[2]  request marker of this attempt (see acquire.lua)
-- KEYS[3]  waiting writers: lockgen_rwlock_writers:{<lock>}
-- ARGV[1]  lease in milliseconds (a re-entry or resend never shortens the TTL)
-- ARGV[2]  "<owner>:write" (the write field)
-- ARGV[3]  owner token (its read field: a reader asking to write is an upgrade)
-- ARGV[4]  the owner's write hold count before this request (0: new)
-- ARGV[5]  marker lifetime in milliseconds
-- ARGV[6]  "1": writers first and waiting: record this writer as waiting
-- ARGV[7]  how long a waiting writer's record lives without a refresh, ms
--          (the set's TTL is extended to it: it expires with its last record)
--
-- Returns an integer
--   0    the write hold is taken (re-entered, or taken by an earlier copy
--        of this very request)
--   > 0  not taken: sleep at most this many ms
--   -1   not taken: the holder's key has no expiry
--   -3   not taken: the request was settled as aborted, or it is a late
--        copy of a request whose hold has ended since
--   -4   refused: the owner holds a read hold (upgrade would deadlock)
--   -6   not taken: the owner's write hold count in Redis is not ARGV[4]
local lease = tonumber(ARGV[1])
local reply, ttl = lockgen_count(KEYS[1], ARGV[2], tonumber(ARGV[4]), KEYS[2], ARGV[5], lease)
if reply then
    return reply
end
if ttl == -2 then
    redis.call('hset', KEYS[1], 'mode', 'write', ARGV[2], 1)
    redis.call('pexpire', KEYS[1], lease)
    redis.call('zrem', KEYS[3], ARGV[2])
    return 0
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 1 then
    return -4
end
if ARGV[6] == '1' then
    local t = redis.call('time')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    local life = tonumber(ARGV[7])
    redis.call('zadd', KEYS[3], now + life, ARGV[2])
    -- The set lives as long as its newest record: a writer that dies while
    -- waiting leaves nothing behind.
    if redis.call('pttl', KEYS[3]) < life then
        redis.call('pexpire', KEYS[3], life)
    end
end
if ttl == 0 then
    return 1
end
return ttl
