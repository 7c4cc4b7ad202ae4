-- handoff: the last release of a reentrant lock (Redisson RLock layout)
-- that hands the lock straight to a waiter when it can, in its own process
-- or in another one.
--
-- A release normally deletes the lock and publishes Redisson's unlock
-- message; a waiter woken by it then sends its own acquire: two round trips
-- from release to the next hold, and every process with a waiter wakes one
-- that tries. Instead:
--   - when the only subscriber of the unlock channel is the releasing
--     client's own (no other process, Go or Java, waits), the lock is given,
--     in this same call, to the waiter the client picked (a local hand-off):
--     the hash then names the grantee as it would after the grantee's own
--     acquire;
--   - otherwise, when every subscriber is a lockgen client that queues its
--     waiters (grant_next.lua, which lua.go prefixes), the lock is granted
--     to the longest waiting of them, and only its process is told;
--   - otherwise the unlock message is published, as Redisson does.
-- Nobody is overtaken: a waiter of another process is subscribed before it
-- sleeps, and then either it is in the queue, or this script publishes.
--
-- KEYS[1]  lock hash
-- KEYS[2]  unlock channel: redisson_lock__channel:{<lock>}
-- KEYS[3]  request marker of the grant (lockgen_latch:{<lock>}:<request id>):
--          the grantee settles a grant whose reply was lost with settle.lua,
--          which marks it "abort"; a copy arriving after that never grants
-- KEYS[4]  lockgen_lock_queue:{<lock>}   (see grant_next.lua)
-- KEYS[5]  lockgen_lock_grants:{<lock>}
-- KEYS[6]  lockgen_lock_hubs:{<lock>}
-- ARGV[1]  releasing owner token (its hold count is 1: the last release)
-- ARGV[2]  publish command: "publish", or "spublish" (sharded pub/sub:
--          the subscribers are counted with SHARDNUMSUB, see grant_next.lua)
-- ARGV[3]  local grantee owner token ("": the client offers none)
-- ARGV[4]  local grantee lease in milliseconds
-- ARGV[5]  the unlock channel again: each client's grant channel is it and
--          ":<client id>"
-- ARGV[6]  "1": it may grant to another process; "0": not this time (the
--          client publishes now and then anyway, for listeners Redis does
--          not count: a Redisson client subscribed on a replica)
-- ARGV[7]  "1": the releasing client is subscribed to KEYS[2] itself, so
--          one subscriber is its own: its waiters are handed the lock
--          locally, never granted through Redis
-- ARGV[8]  "1": the releaser or the local grantee was queued in KEYS[4]
--          (their records are cleared); "0": neither was, and when no
--          other client listens the queue is not looked at
-- ARGV[9]  the releasing client's grant channel (ARGV[5]:<client id>),
--          which it subscribes in the same command as KEYS[2]: with
--          ARGV[7] "1" the client counts as one of KEYS[2]'s subscribers
--          only if that channel has a subscriber here. Its hub may not yet
--          know that the server dropped its subscription (a connection
--          that died unseen, a cluster slot that moved or failed over):
--          then the subscribers counted are all someone else's, and the
--          lock is not handed on past them. "" or absent: ARGV[7] is
--          taken as it is
--
-- Returns
--   nil  ARGV[1] does not hold the lock (expired, deleted, never taken)
--   1    released: lock deleted and the unlock message published
--   2    handed on: ARGV[3] now holds the lock, with lease ARGV[4]
--        (also the reply to a resent copy whose first copy handed it on)
--   3    granted to a waiter queued by another client (or by this one,
--        told on its channel like any other)
--   4    released and published, with other clients listening
-- Asked first, so that a server refusing PUBSUB in scripts fails the call
-- before it writes anything.
local mine = ARGV[9] or ''
local counts
if mine ~= '' then
    counts = lockgen_numsub(ARGV[2], KEYS[2], mine)
else
    counts = lockgen_numsub(ARGV[2], KEYS[2])
end
local listening = counts[2]
-- Whether the releasing client's subscription is (taken as) here.
local subscribed = mine == '' or counts[4] > 0
local own = (ARGV[7] == '1' and subscribed) and 1 or 0
local others = listening - own
-- The releaser's own record: a grant mark, or a registration left by a
-- try that failed before it was handed the lock here.
local queued = false
if ARGV[8] == '1' or others > 0 then
    queued = redis.call('exists', KEYS[4]) == 1
end
if queued then
    redis.call('zrem', KEYS[4], ARGV[1])
end
if ARGV[8] == '1' then
    redis.call('hdel', KEYS[5], ARGV[1])
end
if redis.call('hdel', KEYS[1], ARGV[1]) == 0 then
    -- A resend: its first copy gave the lock to the grantee, who cannot
    -- have released it, since it learns of the grant only from the reply.
    -- A grant by another client's release to the same waiter (its first
    -- copy granted someone else, who released since) is not this
    -- hand-off: its mark says "granted", and its lease is not ARGV[4].
    if ARGV[3] ~= '' and redis.call('hget', KEYS[1], ARGV[3]) == '1'
        and redis.call('hget', KEYS[5], ARGV[3]) ~= 'granted' then
        return 2
    end
    return nil
end
-- The owner's field was the hash's only one: HDEL deleted the lock.
if queued and redis.call('exists', KEYS[4]) == 0 then
    -- No one in line now: no record anyone needs (a grant mark is the
    -- holder's: ours, cleared). The hubs set stays: its clients may still
    -- listen, and a grant counts them.
    redis.call('del', KEYS[5])
    queued = false
end
-- A client that offers a waiter listens (ARGV[7] is "1"): handed on when
-- no one else does.
local handOn = ARGV[3] ~= '' and listening - (subscribed and 1 or 0) <= 0
if queued and not handOn and ARGV[6] == '1' and others > 0 then
    local granted = lockgen_grant_next(KEYS[1], KEYS[4], KEYS[5], KEYS[6], ARGV[5], listening, ARGV[2], lockgen_now(), ARGV[3])
    if granted and granted == ARGV[3] then
        handOn = true -- the longest waiter is the one the client offers
    elseif granted then
        return 3
    end
end
if handOn and redis.call('exists', KEYS[3]) == 0 then
    redis.call('hset', KEYS[1], ARGV[3], 1)
    redis.call('pexpire', KEYS[1], ARGV[4])
    if queued then
        redis.call('zrem', KEYS[4], ARGV[3])
        redis.call('hdel', KEYS[5], ARGV[3])
    end
    return 2
end
redis.pcall(ARGV[2], KEYS[2], '0')
if listening > 1 then
    return 4
end
return 1
