-- rw_force_unlock: delete a read-write lock whoever holds it and wake every
-- waiter. The read holds' timeout keys are left to expire.
--
-- KEYS[1]  lock hash
-- KEYS[2]  channel: redisson_rwlock:{<lock>}
-- ARGV[1]  publish command: "publish" or "spublish"
--
-- Returns
--   1  the lock existed and was deleted
--   0  there was no lock
if redis.call('del', KEYS[1]) == 1 then
    redis.pcall(ARGV[1], KEYS[2], '1')
    return 1
end
return 0
