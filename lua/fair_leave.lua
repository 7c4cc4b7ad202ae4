-- fair_leave: a waiter stops waiting (its wait time ran out or its ctx was
-- cancelled) and leaves the queue, so it neither blocks nor delays the
-- waiters behind it. Nothing behind it needs shifting: a lockgen waiter's
-- score does not count on the lockgen waiters ahead of it (see
-- fair_acquire.lua), and a Redisson waiter's chain only grows longer than
-- it needs. If it was the head and the lock is free, the new head is woken
-- or granted the lock. A lock granted to it that it never took (it gave up
-- as the grant was on its way) is released the same way (runs after
-- fair_next.lua, which lua.go prefixes: see lockgen_fair_next).
--
-- KEYS[1]  lock hash
-- KEYS[2]  queue: redisson_lock_queue:{<lock>}
-- KEYS[3]  scores: redisson_lock_timeout:{<lock>}
-- KEYS[4]  lockgen's waiters: lockgen_fair_waiters:{<lock>} (see
--          fair_acquire.lua)
-- KEYS[5]  lockgen's waiters that take grants: lockgen_fair_grants:{<lock>}
-- ARGV[1]  owner token of the leaving waiter
-- ARGV[2]  wake channel prefix: redisson_lock__channel:{<lock>}
-- ARGV[3]  publish command: "publish" or "spublish"
-- ARGV[4]  "1": a hold of ARGV[1] on the lock is a grant it never took (the
--          client knows the owner holds nothing of it), released here;
--          "0": leave any hold alone
--
-- Returns
--   2  a grant it never took was released
--   1  the waiter was in the queue and left it
--   0  it was not in the queue
local wasHead = redis.call('lindex', KEYS[2], 0) == ARGV[1]
local removed = redis.call('lrem', KEYS[2], 0, ARGV[1])
redis.call('zrem', KEYS[3], ARGV[1])
redis.call('zrem', KEYS[4], ARGV[1])
redis.call('hdel', KEYS[5], ARGV[1])
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if ARGV[4] == '1' and redis.call('hget', KEYS[1], ARGV[1]) == '1' then
    -- The grant was its only field: HDEL frees the lock.
    redis.call('hdel', KEYS[1], ARGV[1])
    lockgen_fair_next(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], now, ARGV[2], ARGV[3])
    return 2
end
if wasHead and redis.call('exists', KEYS[1]) == 0 then
    lockgen_fair_next(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], now, ARGV[2], ARGV[3])
end
if removed > 0 then
    return 1
end
return 0
