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
-- Runs after count.lua (lua.go prefixes it): holds count as in
-- acquire.lua, so a resent copy is told from a new request without a latch
-- per request, and a re-entry whose hold is gone is refused (-6) even when
-- the lock is free, never taken afresh.
--
-- KEYS[1]  lock hash: field = owner token, value = hold count
-- KEYS[2]  queue: redisson_lock_queue:{<lock>} (list of owner tokens)
-- KEYS[3]  deadlines: redisson_lock_timeout:{<lock>} (zset owner -> ms)
-- KEYS[4]  request marker of this attempt (see acquire.lua)
-- ARGV[1]  lease in milliseconds (a re-entry or resend never shortens the TTL)
-- ARGV[2]  owner token
-- ARGV[3]  queue timeout in milliseconds
-- ARGV[4]  the owner's hold count before this request (0: a new acquisition)
-- ARGV[5]  marker lifetime in milliseconds
-- ARGV[6]  "1": join (or stay in) the queue when not taken; "0": one try only
-- ARGV[7]  wake channel prefix: redisson_lock__channel:{<lock>}
-- ARGV[8]  publish command: "publish" or "spublish"
--
-- Returns an integer
--   0    the lock is now held by ARGV[2] (taken, re-entered, or taken by an
--        earlier copy of this very request)
--   > 0  not taken: sleep at most this many ms (holder's lease, or the
--        head's deadline when the lock is free for the head to take)
--   -1   not taken: the holder's key has no expiry
--   -3   not taken: the request was settled as aborted, or it is a late
--        copy of a request whose hold has ended since
--   -6   not taken: the owner's hold count in Redis is not ARGV[4]
local reply, ttl = lockgen_count(KEYS[1], ARGV[2], tonumber(ARGV[4]), KEYS[4], ARGV[5], tonumber(ARGV[1]))
if reply then
    return reply
end
-- A new acquisition (count.lua): the lock is free when the hash is absent.
local free = ttl == -2

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

if free and (not head or head == ARGV[2]) then
    if head then
        redis.call('lpop', KEYS[2])
    end
    redis.call('zrem', KEYS[3], ARGV[2])
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
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
if ttl == 0 then
    return 1
end
return ttl
