-- fair_release: drop one hold of a fair lock; on the last, hand the lock
-- to the first live waiter in line, or wake it on its own channel (runs
-- after fair_next.lua, which lua.go prefixes: see lockgen_fair_next).
--
-- Counts as release.lua does: the client sends the hold count its owner has
-- before this release, so a resent copy of a release that already ran does
-- nothing, and nothing is written per request.
--
-- KEYS[1]  lock hash
-- KEYS[2]  queue: redisson_lock_queue:{<lock>}
-- KEYS[3]  scores: redisson_lock_timeout:{<lock>}
-- KEYS[4]  lockgen's waiters: lockgen_fair_waiters:{<lock>} (see
--          fair_acquire.lua); a skipped waiter's record goes with it
-- KEYS[5]  lockgen's waiters that take grants, with their lease and
--          nonce: lockgen_fair_grants:{<lock>} (see fair_acquire.lua)
-- ARGV[1]  lease in milliseconds, re-applied while holds remain
-- ARGV[2]  owner token
-- ARGV[3]  publish command: "publish" or "spublish"
-- ARGV[4]  the owner's hold count before this release (>= 1)
-- ARGV[5]  wake channel prefix: redisson_lock__channel:{<lock>}; the head
--          is woken on "<prefix>:<its owner token>" with Redisson's "0"
--
-- Returns
--   nil  ARGV[2] does not hold the lock as counted
--   0    one hold dropped, the owner still holds the lock
--   1    the last hold dropped: lock deleted, the head of the queue woken
--   2    the last hold dropped and the lock granted to the head of the queue
local expected = tonumber(ARGV[4])
if expected > 1 then
    local n = tonumber(redis.call('hget', KEYS[1], ARGV[2]))
    if n == expected then
        redis.call('hset', KEYS[1], ARGV[2], n - 1)
        redis.call('pexpire', KEYS[1], ARGV[1])
        return 0
    end
    if n == expected - 1 then
        return 0 -- an earlier copy of this release counted down
    end
    return nil
end
if redis.call('hdel', KEYS[1], ARGV[2]) == 0 then
    return nil
end
redis.call('hdel', KEYS[5], ARGV[2]) -- the "granted" mark of a hold granted to it
-- The owner's field was the hash's only one: HDEL deleted the lock.

local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if lockgen_fair_next(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], now, ARGV[5], ARGV[3]) then
    return 2
end
return 1
