-- write_leave: a waiting writer (writers first) stops waiting: its record
-- is removed, and if no live writer waits any more the readers queued
-- behind it are woken.
--
-- KEYS[1]  lock hash
-- KEYS[2]  channel: redisson_rwlock:{<lock>}
-- KEYS[3]  waiting writers: lockgen_rwlock_writers:{<lock>}
-- ARGV[1]  "<owner>:write"
-- ARGV[2]  publish command: "publish" or "spublish"
--
-- Returns
--   1  the writer was recorded as waiting and is not any more
--   0  it was not recorded
local removed = redis.call('zrem', KEYS[3], ARGV[1])
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('zremrangebyscore', KEYS[3], '-inf', now)
if redis.call('zcard', KEYS[3]) == 0 and redis.call('hget', KEYS[1], 'mode') ~= 'write' then
    redis.pcall(ARGV[2], KEYS[2], '1')
end
return removed
