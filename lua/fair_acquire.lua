-- fair_acquire: take or re-enter a fair lock, or wait in line (Redisson
-- RFairLock layout).
--
-- Runs after count.lua (lua.go prefixes it): holds count as in
-- acquire.lua, so a resent copy is told from a new request without a latch
-- per request, and a re-entry whose hold is gone is refused (-6) even when
-- the lock is free, never taken afresh.
--
-- Waiters queue in arrival order; only the head of the queue may take a
-- free lock. A waiter whose score in the timeout set has passed (its
-- process is gone) is skipped, as Redisson does.
--
-- Scores. A lockgen waiter refreshes its place every time it tries. Its
-- own liveness deadline is server time + queue timeout, kept in lockgen's
-- waiter set (KEYS[5]); lockgen never lowers a score, so a live lockgen
-- waiter is never pruned by lockgen clients. Redisson clients do lower
-- scores: every acquisition by one lowers each remaining score by its wait
-- timeout, and so does one of its waiters giving up, for those behind it.
-- Only a Redisson waiter ahead can do either, once. So a lockgen waiter's
-- score is
--     max(its current score, now + queue timeout * (1 + F))
-- with F the waiters ahead of it that are not lockgen's (not in KEYS[5]):
-- whatever those do, it stays at or above its own deadline. In a queue of
-- lockgen waiters only it is just the deadline. F is counted when the
-- waiter joins (at the tail: the queue's length less lockgen's waiters);
-- a refresh moves the score on by the time since the last one, which
-- keeps F's share as Redisson's arithmetic changed it. So a try costs the
-- same with 2 waiters as with 200. Redisson's wait timeout is
-- taken to be the queue timeout (both default to 5 min): configure them
-- alike when Go and Java wait on one lock.
--
-- A lockgen waiter that finds itself gone from the queue although its
-- record in KEYS[5] says it waits was popped as stale by a Redisson client
-- (whose unlock then woke someone else, or no one): it re-enqueues at once
-- and is told to look again within 100 ms, not after the holder's lease.
-- One still scored but missing from the queue (the queue key was evicted:
-- it has no TTL) re-joins it at the tail; the check costs O(1) while the
-- queue is as long as the scores.
--
-- KEYS[1]  lock hash: field = owner token, value = hold count
-- KEYS[2]  queue: redisson_lock_queue:{<lock>} (list of owner tokens)
-- KEYS[3]  scores: redisson_lock_timeout:{<lock>} (zset owner -> ms)
-- KEYS[4]  request marker of this attempt (see acquire.lua)
-- KEYS[5]  lockgen's waiters: lockgen_fair_waiters:{<lock>} (zset owner ->
--          liveness deadline ms); lockgen clients only
-- KEYS[6]  lockgen's waiters that take grants: lockgen_fair_grants:{<lock>}
--          (hash owner -> "<lease ms>:<nonce>"): a release hands such a
--          waiter the lock when it is the head (see fair_next.lua), and
--          marks it "granted" until the grantee's try or release clears it
-- ARGV[1]  lease in milliseconds (a re-entry or resend never shortens the TTL)
-- ARGV[2]  owner token
-- ARGV[3]  queue timeout in milliseconds
-- ARGV[4]  the owner's hold count before this request (0: a new acquisition)
-- ARGV[5]  marker lifetime in milliseconds
-- ARGV[6]  "1": join (or stay in) the queue when not taken; "0": one try only
-- ARGV[7]  wake channel prefix: redisson_lock__channel:{<lock>}
-- ARGV[8]  publish command: "publish" or "spublish"
-- ARGV[9]  "<lease ms>:<nonce>": the lease a release may grant this
--          waiter the lock with when it is the head, and the nonce of this
--          try, which the grant's message carries back (so a waiter claims
--          only a grant made after its latest try); "0": no grants (it takes
--          the lock itself)
--
-- Returns an integer
--   0    the lock is now held by ARGV[2] (taken, re-entered, or taken by an
--        earlier copy of this very request)
--   > 0  not taken: sleep at most this many ms (holder's lease, the head's
--        score when the lock is free for the head to take, or 100 after
--        re-enqueueing a waiter that had been popped)
--   -1   not taken: the holder's key has no expiry
--   -3   not taken: the request was settled as aborted, or it is a late
--        copy of a request whose hold has ended since
--   -6   not taken: the owner's hold count in Redis is not ARGV[4]
-- lockgen_fair_lost reports whether owner, in the scores, is missing
-- from the queue: the queue key was evicted (it has no TTL) or cut while
-- the scores stayed. Only a queue shorter than the scores is scanned.
local function lockgen_fair_lost(owner)
    if redis.call('llen', KEYS[2]) >= redis.call('zcard', KEYS[3]) then
        return false
    end
    for _, w in ipairs(redis.call('lrange', KEYS[2], 0, -1)) do
        if w == owner then
            return false
        end
    end
    return true
end

local reply, ttl = lockgen_count(KEYS[1], ARGV[2], tonumber(ARGV[4]), KEYS[4], ARGV[5], tonumber(ARGV[1]), nil, KEYS[6])
if reply then
    return reply
end
-- A new acquisition (count.lua): the lock is free when the hash is absent.
local free = ttl == -2
local qt = tonumber(ARGV[3])
local join = ARGV[6] == '1'

local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

redis.call('zremrangebyscore', KEYS[5], '-inf', now)
local popped = join and redis.call('zscore', KEYS[5], ARGV[2]) ~= false
    and redis.call('zscore', KEYS[3], ARGV[2]) == false

local pruned = false
local head = redis.call('lindex', KEYS[2], 0)
while head do
    local deadline = redis.call('zscore', KEYS[3], head)
    if deadline and tonumber(deadline) > now then
        break
    end
    redis.call('lpop', KEYS[2])
    redis.call('zrem', KEYS[3], head)
    redis.call('zrem', KEYS[5], head)
    redis.call('hdel', KEYS[6], head)
    pruned = true
    head = redis.call('lindex', KEYS[2], 0)
end

if free and (not head or head == ARGV[2]) then
    if head then
        redis.call('lpop', KEYS[2])
    end
    redis.call('zrem', KEYS[3], ARGV[2])
    redis.call('zrem', KEYS[5], ARGV[2])
    redis.call('hdel', KEYS[6], ARGV[2])
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return 0
end

if join then
    local current = redis.call('zscore', KEYS[3], ARGV[2])
    local mine = redis.call('zscore', KEYS[5], ARGV[2])
    local score
    if current and mine then
        -- In line since its last refresh (mine = that refresh + qt): only
        -- Redisson waiters ahead moved its score since, each by qt as it
        -- left the waiters ahead, so the score still carries the right
        -- count of them. Move it on by the time since that refresh: O(1)
        -- per try, whatever the queue's length.
        score = math.max(tonumber(current) + now + qt - tonumber(mine), tonumber(current))
    else
        local foreign = 0
        if not current and not mine then
            -- Joining at the tail: every waiter is ahead, and lockgen's
            -- are those in KEYS[5]. (One popped by Redisson and not back
            -- yet is counted as in line: the score comes out one qt low,
            -- and if Redisson's arithmetic then makes it look stale, it is
            -- popped and re-enqueues, as below.)
            foreign = math.max(redis.call('llen', KEYS[2]) - redis.call('zcard', KEYS[5]), 0)
        else
            -- Back after being popped, or in line after its record ran
            -- out: count the foreign waiters ahead, once.
            for _, w in ipairs(redis.call('lrange', KEYS[2], 0, -1)) do
                if w == ARGV[2] then
                    break
                end
                if redis.call('zscore', KEYS[5], w) == false then
                    foreign = foreign + 1
                end
            end
        end
        score = now + qt * (1 + foreign)
        if current then
            score = math.max(score, tonumber(current))
        end
    end
    if redis.call('zadd', KEYS[3], score, ARGV[2]) == 1 or lockgen_fair_lost(ARGV[2]) then
        redis.call('rpush', KEYS[2], ARGV[2])
    end
    redis.call('zadd', KEYS[5], now + qt, ARGV[2])
    if redis.call('pttl', KEYS[5]) < qt then
        redis.call('pexpire', KEYS[5], qt)
    end
    if ARGV[9] ~= '0' then
        redis.call('hset', KEYS[6], ARGV[2], ARGV[9])
        if redis.call('pttl', KEYS[6]) < qt then
            redis.call('pexpire', KEYS[6], qt)
        end
    end
    head = redis.call('lindex', KEYS[2], 0)
end

local sleep
if free then
    -- The lock waits for the head. If dead heads were just skipped, the
    -- new head may be asleep: wake it.
    if pruned and head ~= ARGV[2] then
        redis.pcall(ARGV[8], ARGV[7] .. ':' .. head, '0')
    end
    sleep = math.max(tonumber(redis.call('zscore', KEYS[3], head)) - now, 1)
elseif ttl == 0 then
    sleep = 1
else
    sleep = ttl
end
if popped and (sleep < 0 or sleep > 100) then
    sleep = 100
end
return sleep
