-- fair_leave: a waiter stops waiting (its wait time ran out or its ctx was
-- cancelled) and leaves the queue, so it neither blocks nor delays the
-- waiters behind it. Nothing behind it needs shifting: a lockgen waiter's
-- score does not count on the lockgen waiters ahead of it (see
-- fair_acquire.lua), and a Redisson waiter's chain only grows longer than
-- it needs. If it was the head and the lock is free, the new head is woken.
--
-- KEYS[1]  lock hash
-- KEYS[2]  queue: redisson_lock_queue:{<lock>}
-- KEYS[3]  scores: redisson_lock_timeout:{<lock>}
-- KEYS[4]  lockgen's waiters: lockgen_fair_waiters:{<lock>} (see
--          fair_acquire.lua)
-- ARGV[1]  owner token of the leaving waiter
-- ARGV[2]  wake channel prefix: redisson_lock__channel:{<lock>}
-- ARGV[3]  publish command: "publish" or "spublish"
--
-- Returns
--   1  the waiter was in the queue and left it
--   0  it was not in the queue
local wasHead = redis.call('lindex', KEYS[2], 0) == ARGV[1]
local removed = redis.call('lrem', KEYS[2], 0, ARGV[1])
redis.call('zrem', KEYS[3], ARGV[1])
redis.call('zrem', KEYS[4], ARGV[1])
if wasHead and redis.call('exists', KEYS[1]) == 0 then
    local head = redis.call('lindex', KEYS[2], 0)
    if head then
        redis.call(ARGV[3], ARGV[2] .. ':' .. head, '0')
    end
end
if removed > 0 then
    return 1
end
return 0
