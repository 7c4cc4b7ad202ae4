-- count: the hold-count rule, written once. lua.go prefixes this file to
-- every acquire script (acquire.lua, fair_acquire.lua, read_acquire.lua,
-- write_acquire.lua, multi_acquire.lua); it defines local functions only
-- and touches no key until one of them is called.
--
-- The rule. An acquire request carries the hold count its owner has before
-- the request ("expected"; an owner's acquire and release calls on one
-- lock run one at a time) and a request marker key, absent on the hot path
-- ("abort" once settle.lua settled the request as not taken, "took" once
-- the request is known to have taken the lock). With n the owner's count
-- in the lock hash:
--
--   n == expected + 1     a resend: an earlier copy of this very request
--                         took the lock. It counts once: mark it "took" (so
--                         no copy arriving after the hold ended takes the
--                         lock again), re-apply the lease without ever
--                         shortening the TTL, reply 0.
--   n == expected > 0     a re-entry: refused with -3 if the marker exists;
--                         else count + 1 and the lease re-applied without
--                         ever shortening the TTL, reply 0.
--   any other n, when n > 0 or expected > 0
--                         -6: the hold the request counts on is gone (its
--                         lease ran out, the key was deleted, or the count
--                         moved under the owner); never taken afresh.
--   n == expected == 0    a new acquisition: -3 if the marker exists; else
--                         the acquire script decides whether the lock is
--                         free for it (kind-specific).
--
-- "Never shortening" matters because the client's deadline for the owner's
-- hold is the longest lease any confirmed acquisition applied: a resend or
-- re-entry with a shorter lease must not cut it (design.md §7).
--
-- Functions (all keys are the calling script's KEYS; leases are numbers):
--
-- lockgen_count(hash, field, expected, marker, markerTTL, lease, tkey, grants)
--   applies the whole rule for one lock. tkey is nil, or the key that
--   carries the lease of the owner's hold number expected + 1 (a read
--   hold's rwlock_timeout key): a re-entry SETs it to the new count with
--   the lease, a resend re-applies the lease to it without shortening.
--   grants is nil, or a fair lock's lockgen_fair_grants key: a new
--   acquisition that finds its count already 1 because a release granted
--   it the lock (the field says "granted": fair_next.lua) is that grant
--   taken, not a resend: the lease is re-applied and no marker written.
--   Returns reply, ttl:
--     reply 0, -3 or -6  the script's answer, already applied
--     reply nil          a new acquisition, free to go on; ttl is the
--                        hash's PTTL: -2 no hash (the lock is free), -1 no
--                        expiry, otherwise ms left (0 is possible)
--
-- lockgen_classify(hash, field, expected, marker) reads, writes nothing:
--   returns 'resend', n | 'reenter', n | 'new', ttl | -3 | -6
-- lockgen_resent(hash, marker, markerTTL, lease, tkey, n) applies a resend.
-- lockgen_reenter(hash, field, lease, tkey) applies a re-entry (or takes a
--   free hash afresh: HINCRBY of an absent field gives 1).
-- lockgen_extend(key, lease) re-applies lease to key unless its TTL is
--   longer already (a key without expiry gets the lease).
--
-- A multi-lock classifies every member before it writes anything, so it
-- uses the three parts; every other script calls lockgen_count.

local function lockgen_extend(key, lease)
    if redis.call('pttl', key) < lease then
        redis.call('pexpire', key, lease)
    end
end

local function lockgen_classify(hash, field, expected, marker)
    -- One EXISTS tells the hot paths apart: 0 = a free lock and no marker.
    local present = redis.call('exists', hash, marker)
    if present == 0 then
        if expected == 0 then
            return 'new', -2
        end
        return -6
    end
    local n = tonumber(redis.call('hget', hash, field)) or 0
    if n == expected + 1 then
        return 'resend', n
    end
    if n > 0 and n == expected then
        if present == 2 then
            return -3 -- the hash exists, so the other key is the marker
        end
        return 'reenter', n
    end
    if n > 0 or expected > 0 then
        return -6
    end
    if present == 2 then
        return -3
    end
    -- One of the two exists: the hash (held by others) or only the marker.
    local ttl = redis.call('pttl', hash)
    if ttl == -2 then
        return -3
    end
    return 'new', ttl
end

local function lockgen_resent(hash, marker, markerTTL, lease, tkey, n)
    redis.call('set', marker, 'took', 'nx', 'px', markerTTL)
    lockgen_extend(hash, lease)
    if tkey then
        if redis.call('pttl', tkey) < lease then
            redis.call('set', tkey, n, 'px', lease)
        end
    end
end

local function lockgen_reenter(hash, field, lease, tkey)
    local n = redis.call('hincrby', hash, field, 1)
    lockgen_extend(hash, lease)
    if tkey then
        redis.call('set', tkey, n, 'px', lease)
    end
end

local function lockgen_count(hash, field, expected, marker, markerTTL, lease, tkey, grants)
    local verdict, v = lockgen_classify(hash, field, expected, marker)
    if verdict == 'resend' and grants and expected == 0 and redis.call('hget', grants, field) == 'granted' then
        redis.call('hdel', grants, field)
        lockgen_extend(hash, lease)
        return 0
    end
    if verdict == 'resend' then
        lockgen_resent(hash, marker, markerTTL, lease, tkey, v)
        return 0
    end
    if verdict == 'reenter' then
        lockgen_reenter(hash, field, lease, tkey)
        return 0
    end
    if verdict == 'new' then
        return nil, v
    end
    return verdict
end

