-- force_unlock: delete a lock whoever holds it, and wake one waiter.
--
-- KEYS[1]  lock key
-- KEYS[2]  unlock channel: redisson_lock__channel:{<lock>}
-- ARGV[1]  unlock message ("0")
-- ARGV[2]  publish command: "publish", or "spublish" on a sharded cluster
--
-- Returns
--   1  the lock existed and was deleted
--   0  there was no lock
if redis.call('del', KEYS[1]) == 1 then
    redis.pcall(ARGV[2], KEYS[2], ARGV[1])
    return 1
end
return 0
