-- fair_next: who goes next once a fair lock is free, written once. lua.go
-- prefixes this file to fair_release.lua and fair_leave.lua; it defines a
-- local function only.
--
-- lockgen_fair_next(lock, queue, scores, waiters, grants, now, prefix, publish)
--   skips the dead heads of the queue (their score has passed: their
--   process is gone), then, for the first live head:
--   - a lockgen waiter that takes grants (in grants, "<lease ms>:<nonce>"
--     from its latest try, and alive by its record in waiters): the lock is
--     given to it here, as its own acquire would take it (out of the queue,
--     HSET 1), and it is told so on its channel with "2:<nonce>": its client
--     claims the grant only if the nonce is its latest try's (a grant whose
--     message came late, after the waiter tried again, is not claimed: its
--     lease may have run out meanwhile). It holds the lock one message after the
--     release instead of after a message and its own acquire. The lease is
--     its own, but never beyond its record's deadline (its last try + the
--     queue timeout): a waiter whose process died holds the lock no longer
--     than it would have blocked the queue as a dead head. Its client
--     counts the hold from its last try (sent before this grant) with the
--     shorter of its lease and the queue timeout, so never past the key's
--     expiry;
--   - any other waiter (a Redisson one, or lockgen's without grants) is
--     woken with Redisson's "0" on its channel "<prefix>:<owner>" and
--     takes the lock itself.
--   Returns the owner granted, or nil.
--
-- A client that does not know "2" (an older lockgen) never registers in
-- grants, so it is never granted; were it sent "2:..." it would try at
-- once, and its acquire counts the grant as its own (count.lua's resend
-- rule).

local function lockgen_fair_next(lock, queue, scores, waiters, grants, now, prefix, publish)
    local head = redis.call('lindex', queue, 0)
    while head do
        local deadline = redis.call('zscore', scores, head)
        if deadline and tonumber(deadline) > now then
            local grant = redis.call('hget', grants, head)
            local alive = redis.call('zscore', waiters, head)
            local px, nonce
            if grant then
                px, nonce = string.match(grant, '^(%d+):(.+)$')
            end
            if px and alive and tonumber(alive) > now then
                redis.call('lpop', queue)
                redis.call('zrem', scores, head)
                redis.call('zrem', waiters, head)
                -- "granted": a try of the grantee that comes before it
                -- claims the grant takes it without a resend's marker
                -- (count.lua); its release clears the field.
                redis.call('hset', grants, head, 'granted')
                local lease = math.min(tonumber(px), tonumber(alive) - now)
                redis.call('hset', lock, head, 1)
                redis.call('pexpire', lock, lease)
                if redis.call('llen', queue) == 0 then
                    -- No one else waits: the grants hash lives no longer
                    -- than this grant, so a mark its grantee could not
                    -- clear (its release lost to a fault) goes with it.
                    redis.call('pexpire', grants, lease)
                end
                redis.pcall(publish, prefix .. ':' .. head, '2:' .. nonce)
                return head
            end
            redis.pcall(publish, prefix .. ':' .. head, '0')
            return nil
        end
        redis.call('lpop', queue)
        redis.call('zrem', scores, head)
        redis.call('zrem', waiters, head)
        redis.call('hdel', grants, head)
        head = redis.call('lindex', queue, 0)
    end
    return nil
end
