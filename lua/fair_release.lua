-- fair_release: drop one hold of a fair lock; on the last, wake only the
-- first live waiter in line, on its own channel.
--
-- KEYS[1]  lock hash
-- KEYS[2]  queue: redisson_lock_queue:{<lock>}
-- KEYS[3]  deadlines: redisson_lock_timeout:{<lock>}
-- KEYS[4]  request latch of this release (see release.lua)
-- ARGV[1]  unlock message ("0")
-- ARGV[2]  lease in milliseconds, re-applied while holds remain
-- ARGV[3]  owner token
-- ARGV[4]  publish command: "publish" or "spublish"
-- ARGV[5]  latch lifetime in milliseconds
-- ARGV[6]  wake channel prefix: redisson_lock__channel:{<lock>}; the head
--          is woken on "<prefix>:<its owner token>"
-- ARGV[7]  request id of this release
--
-- Returns
--   nil  ARGV[3] does not hold the lock
--   0    one hold dropped, the owner still holds the lock
--   1    the last hold dropped: lock deleted, the head of the queue woken
local seen = redis.call('get', KEYS[4])
if seen == '0:' .. ARGV[7] then
    return 0
end
if seen == '1:' .. ARGV[7] then
    return 1
end
local count = redis.call('hget', KEYS[1], ARGV[3])
if not count then
    return nil
end
count = tonumber(count) - 1
if count > 0 then
    redis.call('hset', KEYS[1], ARGV[3], count)
    redis.call('pexpire', KEYS[1], ARGV[2])
    redis.call('set', KEYS[4], '0:' .. ARGV[7], 'px', ARGV[5])
    return 0
end
redis.call('del', KEYS[1])

local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local head = redis.call('lindex', KEYS[2], 0)
while head do
    local deadline = redis.call('zscore', KEYS[3], head)
    if deadline and tonumber(deadline) > now then
        redis.call(ARGV[4], ARGV[6] .. ':' .. head, ARGV[1])
        break
    end
    redis.call('lpop', KEYS[2])
    redis.call('zrem', KEYS[3], head)
    head = redis.call('lindex', KEYS[2], 0)
end
redis.call('set', KEYS[4], '1:' .. ARGV[7], 'px', ARGV[5])
return 1
