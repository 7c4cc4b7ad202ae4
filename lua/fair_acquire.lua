-- fair_acquire: take or re-enter a fair lock, or wait in line (Redisson
-- RFairLock layout).
--
-- Waiters queue in arrival order; only the head of the queue may take a
-- free lock. Each waiter's score in the timeout set is its liveness
-- deadline: server time + queue timeout, refreshed every time the waiter
-- tries. A waiter whose deadline passed (its process is gone) is skipped.
-- Unlike Redisson, a live waiter is never pruned: its deadline does not
-- depend on how long the waiters ahead of it take.
--
-- KEYS[1]  lock hash: field = owner token, value = hold count
-- KEYS[2]  queue: redisson_lock_queue:{<lock>} (list of owner tokens)
-- KEYS[3]  deadlines: redisson_lock_timeout:{<lock>} (zset owner -> ms)
-- KEYS[4]  request latch of this attempt (see settle.lua)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner token
-- ARGV[3]  queue timeout in milliseconds
-- ARGV[4]  request id of this attempt
-- ARGV[5]  latch lifetime in milliseconds
-- ARGV[6]  "1": join (or stay in) the queue when not taken; "0": one try only
-- ARGV[7]  wake channel prefix: redisson_lock__channel:{<lock>}
-- ARGV[8]  publish command: "publish" or "spublish"
--
-- Returns an integer
--   0    the lock is now held by ARGV[2] (or this request already took it)
--   > 0  not taken: sleep at most this many ms (holder's lease, or the
--        head's deadline when the lock is free for the head to take)
--   -1   not taken: the holder's key has no expiry
--   -3   not taken: this request was settled as aborted
local seen = redis.call('get', KEYS[4])
if seen == ARGV[4] then
    return 0
end
if seen == 'abort:' .. ARGV[4] then
    return -3
end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local pruned = false
local head = redis.call('lindex', KEYS[2], 0)
while head do
    local deadline = redis.call('zscore', KEYS[3], head)
    if deadline and tonumber(deadline) > now then
        break
    end
    redis.call('lpop', KEYS[2])
    redis.call('zrem', KEYS[3], head)
    pruned = true
    head = redis.call('lindex', KEYS[2], 0)
end

local free = redis.call('exists', KEYS[1]) == 0
if free and (not head or head == ARGV[2]) then
    if head then
        redis.call('lpop', KEYS[2])
    end
    redis.call('zrem', KEYS[3], ARGV[2])
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    redis.call('set', KEYS[4], ARGV[4], 'px', ARGV[5])
    return 0
end
if not free and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    redis.call('set', KEYS[4], ARGV[4], 'px', ARGV[5])
    return 0
end

if ARGV[6] == '1' then
    if redis.call('zadd', KEYS[3], now + tonumber(ARGV[3]), ARGV[2]) == 1 then
        redis.call('rpush', KEYS[2], ARGV[2])
    end
    head = redis.call('lindex', KEYS[2], 0)
end
if free then
    -- The lock waits for the head. If dead heads were just skipped, the
    -- new head may be asleep: wake it.
    if pruned and head ~= ARGV[2] then
        redis.call(ARGV[8], ARGV[7] .. ':' .. head, '0')
    end
    local wait = tonumber(redis.call('zscore', KEYS[3], head)) - now
    if wait < 1 then
        return 1
    end
    return wait
end
local ttl = redis.call('pttl', KEYS[1])
if ttl == 0 then
    return 1
end
return ttl
