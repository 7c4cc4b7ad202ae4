-- fair_force_unlock: delete a fair lock whoever holds it and wake the head
-- of the queue on its own channel.
--
-- KEYS[1]  lock hash
-- KEYS[2]  queue: redisson_lock_queue:{<lock>}
-- ARGV[1]  unlock message ("0")
-- ARGV[2]  publish command: "publish" or "spublish"
-- ARGV[3]  wake channel prefix: redisson_lock__channel:{<lock>}
--
-- Returns
--   1  the lock existed and was deleted
--   0  there was no lock
if redis.call('del', KEYS[1]) == 1 then
    local head = redis.call('lindex', KEYS[2], 0)
    if head then
        redis.pcall(ARGV[2], ARGV[3] .. ':' .. head, ARGV[1])
    end
    return 1
end
return 0
