-- grant_next: who a reentrant lock's release grants the lock to in another
-- process, written once. lua.go prefixes this file to handoff.lua and
-- mutex_leave.lua (and acquire.lua, which uses lockgen_enqueue only); it
-- defines local functions only.
--
-- Redisson's RLock has no queue: its release deletes the lock and publishes
-- "0", and every process with a waiter wakes one, all of them try, one
-- wins. lockgen keeps, next to the RLock layout and in its slot, a queue of
-- its own waiters, so that a release can give the lock to the longest
-- waiting of them directly, whichever process it is in, and wake that
-- process only:
--
--   lockgen_lock_queue:{<lock>}  ZSET  owner token -> when it first waited
--                                      (server ms): the order of grants
--   lockgen_lock_grants:{<lock>} HASH  owner token -> "<lease ms>:<alive
--                                      until ms>:<nonce>" (its latest try:
--                                      lease "0" if it takes no grants),
--                                      or "granted" from its grant until
--                                      its try or release clears it
--   lockgen_lock_hubs:{<lock>}   SET   the ids of the lockgen clients that
--                                      queued a waiter lately (they may
--                                      still listen); one whose channel has
--                                      no subscriber is dropped
--   redisson_lock__channel:{<lock>}:<client id>
--                                      each such client's grant channel
--                                      (lockgen's own, under Redisson's
--                                      prefix so that ACLs granting its
--                                      channels grant it): subscribed in the same
--                                      SUBSCRIBE as the lock's own channel,
--                                      so while it is subscribed that
--                                      client listens, and a grant is
--                                      published there: "2:<owner> <nonce>"
--
-- A grant is made only when every subscriber of the lock's channel is one
-- of these clients (the sum of their channels' subscribers equals the
-- lock channel's): then no Redisson waiter, nor one of a lockgen without
-- grants, is passed over; otherwise the release publishes "0" as Redisson
-- does. A client whose channel has no subscriber is gone (its process died
-- or stopped waiting): its waiters are skipped, so a killed waiter never
-- holds up the lock. A waiter whose registration is older than its alive
-- time (its process hangs, or is cut off with its connection still open)
-- is skipped too; one granted the lock while cut off holds it at most
-- until then (the grant's lease is cut to it).
--
-- lockgen_now() is the server's clock in ms.
--
-- lockgen_numsub(publish, channel...) counts each channel's subscribers
--   that publish reaches: PUBSUB NUMSUB for "publish", PUBSUB SHARDNUMSUB
--   for "spublish". A shard channel lives on its slot's node, so on Redis
--   Cluster SHARDNUMSUB there counts every client subscribed to it on that
--   master (not one on a replica: see the client's publish streak);
--   NUMSUB on a cluster counts one node's subscribers only, which is why
--   a client with classic pub/sub on a cluster never hands off or grants.
--
-- lockgen_enqueue(queue, grants, hubs, owner, px, life, hub, nonce, now)
--   registers a waiter's latest try (acquire.lua): its place in the queue
--   is kept from its first try; the record lives life ms.
--
-- lockgen_grant_next(lock, queue, grants, hubs, prefix, listening,
--                    publish, now, localOwner)
--   grants the free lock to the head of the queue, when it can: returns the
--   owner granted, or nil (the caller publishes "0"). When the head is
--   localOwner (a waiter of the releasing client that the release offers
--   the lock to itself: handoff.lua), it returns it without granting.

local function lockgen_now()
    local t = redis.call('time')
    return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function lockgen_numsub(publish, ...)
    if publish == 'spublish' then
        return redis.call('pubsub', 'shardnumsub', ...)
    end
    return redis.call('pubsub', 'numsub', ...)
end

local function lockgen_enqueue(queue, grants, hubs, owner, px, life, hub, nonce, now)
    redis.call('zadd', queue, 'nx', now, owner)
    redis.call('hset', grants, owner, px .. ':' .. (now + life) .. ':' .. nonce)
    redis.call('sadd', hubs, hub)
    -- The three keys outlive every record and grant in them, and go
    -- once no one registers any more (the queue and records as soon as
    -- they are empty, the hubs set then).
    redis.call('pexpire', queue, 2 * life)
    redis.call('pexpire', grants, 2 * life)
    redis.call('pexpire', hubs, 2 * life)
end

local function lockgen_grant_next(lock, queue, grants, hubs, prefix, listening, publish, now, localOwner)
    local ids = redis.call('smembers', hubs)
    if #ids == 0 then
        return nil
    end
    local channels = {}
    for i, id in ipairs(ids) do
        channels[i] = prefix .. ':' .. id
    end
    local counts = lockgen_numsub(publish, unpack(channels))
    local live = {}
    local sum = 0
    for i, id in ipairs(ids) do
        local n = counts[2 * i]
        if n > 0 then
            live[id] = true
            sum = sum + n
        else
            redis.call('srem', hubs, id)
        end
    end
    if sum ~= listening then
        return nil -- someone else listens: a Redisson waiter, say
    end
    while true do
        local head = redis.call('zrange', queue, 0, 0)[1]
        if not head then
            return nil
        end
        local reg = redis.call('hget', grants, head)
        local px, alive, nonce
        if reg then
            px, alive, nonce = string.match(reg, '^(%d+):(%d+):(.+)$')
        end
        local id = string.match(head, '^(.+):[^:]+$')
        if px and id and live[id] and tonumber(alive) > now then
            if px == '0' then
                return nil -- it takes no grants: wake everyone
            end
            if head == localOwner then
                return head
            end
            redis.call('zrem', queue, head)
            -- "granted": its try before it claims the grant takes it as
            -- its own (count.lua); its try or release clears the field.
            redis.call('hset', grants, head, 'granted')
            redis.call('hset', lock, head, 1)
            redis.call('pexpire', lock, math.min(tonumber(px), tonumber(alive) - now))
            redis.pcall(publish, prefix .. ':' .. id, '2:' .. head .. ' ' .. nonce)
            return head
        end
        redis.call('zrem', queue, head)
        if reg ~= 'granted' then
            redis.call('hdel', grants, head)
        end
    end
end
