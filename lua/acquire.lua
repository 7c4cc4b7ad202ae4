-- acquire: take or re-enter a reentrant lock (Redisson RLock layout).
--
-- Runs after count.lua (lua.go prefixes it): the hold-count rule, resends,
-- re-entries and request markers are decided there. The client sends the
-- hold count its owner has before this request (its acquire and release
-- calls on one lock run one at a time). That tells a new acquisition from
-- a resent copy of one that already ran (the count is then one higher), so
-- the hot path writes nothing but the lock itself.
--
-- KEYS[1]  lock hash: field = owner token, value = hold count
-- KEYS[2]  request marker of this attempt: lockgen_latch:{<lock>}:<request id>.
--          Absent on the hot path. "abort" once settle.lua settled the
--          attempt as not taken; "took" once the attempt is known to have
--          taken the lock (settled, or a resend found its first copy done).
--          Either way no later copy of the request takes the lock again.
-- ARGV[1]  lease in milliseconds (PEXPIRE of the hash; a re-entry or a
--          resend never shortens the hash's TTL)
-- ARGV[2]  owner token
-- ARGV[3]  the owner's hold count before this request (0: a new acquisition)
-- ARGV[4]  marker lifetime in milliseconds
--
-- A waiting lockgen client's try also registers the waiter for grants
-- (grant_next.lua, which lua.go prefixes) with three more keys:
-- KEYS[3]  lockgen_lock_queue:{<lock>}
-- KEYS[4]  lockgen_lock_grants:{<lock>}: a field "granted" makes a try
--          that finds its count already 1 the grant taken (count.lua)
-- KEYS[5]  lockgen_lock_hubs:{<lock>}
-- ARGV[5]  the lease a release may grant it the lock with, in ms ("0":
--          it takes no grants, but is in line: grants wait for it)
-- ARGV[6]  how long its record lives, in ms
-- ARGV[7]  the client's id (its grant channel
--          redisson_lock__channel:{<lock>}:<id> is subscribed)
-- A try that takes the lock leaves the queue; one that does not is (re)
-- registered with its nonce: KEYS[2], the try's request marker.
--
-- Returns an integer (never nil: a nil reply costs the client an error path)
--   0    the lock is now held by ARGV[2] (taken, re-entered, or taken by an
--        earlier copy of this very request: a resend never counts twice)
--   > 0  not taken: the remaining lease of the current holder in ms (>= 1)
--   -1   not taken: the holder's key has no expiry
--   -3   not taken: the request was settled as aborted, or it is a late
--        copy of a request whose hold has ended since
--   -6   not taken: the owner's hold count in Redis is not ARGV[3] (the
--        hold a re-entry counts on is gone: its lease ran out or the key
--        was deleted)
local lease = tonumber(ARGV[1])
local queued = KEYS[3] ~= nil
local reply, ttl = lockgen_count(KEYS[1], ARGV[2], tonumber(ARGV[3]), KEYS[2], ARGV[4], lease, nil, KEYS[4])
if reply then
    if queued and reply == 0 then
        redis.call('zrem', KEYS[3], ARGV[2])
        if redis.call('exists', KEYS[3]) == 0 then
            redis.call('del', KEYS[4])
        end
    end
    return reply
end
if ttl == -2 then
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], lease)
    if queued then
        redis.call('zrem', KEYS[3], ARGV[2])
        redis.call('hdel', KEYS[4], ARGV[2])
        if redis.call('exists', KEYS[3]) == 0 then
            -- The last in line, holding the lock: no grant mark anyone
            -- needs. (The hubs set stays: its clients may still listen.)
            redis.call('del', KEYS[4])
        end
    end
    return 0
end
if queued then
    lockgen_enqueue(KEYS[3], KEYS[4], KEYS[5], ARGV[2], ARGV[5], tonumber(ARGV[6]), ARGV[7], KEYS[2], lockgen_now())
end
if ttl == 0 then
    return 1
end
return ttl
