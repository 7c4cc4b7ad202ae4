-- mutex_leave: a waiter of a reentrant lock stops waiting (its wait time
-- ran out or its ctx was cancelled) and leaves lockgen's queue
-- (grant_next.lua, which lua.go prefixes), so no release grants it the
-- lock. A lock granted to it that it never took (it gave up as the grant
-- was on its way) is released, and granted on or published as a release
-- would.
--
-- KEYS[1]  lock hash
-- KEYS[2]  unlock channel: redisson_lock__channel:{<lock>}
-- KEYS[3]  lockgen_lock_queue:{<lock>}
-- KEYS[4]  lockgen_lock_grants:{<lock>}
-- KEYS[5]  lockgen_lock_hubs:{<lock>}
-- ARGV[1]  owner token of the leaving waiter
-- ARGV[2]  publish command: "publish", or "spublish" (counted with
--          SHARDNUMSUB, see grant_next.lua)
-- ARGV[3]  "1": a hold of ARGV[1] on the lock is a grant it never took (the
--          client knows the owner holds nothing of it), released here;
--          "0": leave any hold alone
-- ARGV[4]  the unlock channel again: each client's grant channel is it and
--          ":<client id>"
--
-- Returns
--   2  a grant it never took was released
--   1  it was in the queue and left it
--   0  it was not in the queue
local granted = redis.call('hget', KEYS[4], ARGV[1]) == 'granted'
local removed = redis.call('zrem', KEYS[3], ARGV[1])
redis.call('hdel', KEYS[4], ARGV[1])
if ARGV[3] == '1' and granted and redis.call('hget', KEYS[1], ARGV[1]) == '1' then
    -- The grant was its only field: HDEL frees the lock.
    redis.call('hdel', KEYS[1], ARGV[1])
    local listening = lockgen_numsub(ARGV[2], KEYS[2])[2]
    if listening == 0 or not lockgen_grant_next(KEYS[1], KEYS[3], KEYS[4], KEYS[5], ARGV[4], listening, ARGV[2], lockgen_now(), '') then
        redis.pcall(ARGV[2], KEYS[2], '0')
    end
    return 2
end
return removed
