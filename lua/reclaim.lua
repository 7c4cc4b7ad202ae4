-- reclaim: the permit-expiry rule of the permit-expirable semaphore
-- (Redisson RPermitExpirableSemaphore), written once. lua.go prefixes this
-- file to every semaphore script that reads or changes the free count; it
-- defines local functions only.
--
-- lockgen_now() is the server's clock in epoch milliseconds (TIME). The
-- permits' expiry scores are written and compared with it, so every lockgen
-- client agrees on when a permit runs out whatever the clocks of their
-- hosts say: a holder's deadline (send time + lease - drift, on its own
-- clock) is then always before the moment any script sees the score pass,
-- as with PEXPIRE. Redisson passes its client's clock instead; a Java
-- client on a host whose clock is off reclaims early or late by that much.
--
-- lockgen_reclaim(counter, timeouts, channel, publish, now) removes every
-- held permit whose score is <= now, adds their number to the counter and,
-- when the counter is then > 0, publishes it on channel (the payload counts
-- free permits: a waiter's wake-up). Returns the number reclaimed.
--
-- lockgen_nearest(timeouts) is the earliest score still held, or nil.

local function lockgen_now()
    local t = redis.call('time')
    return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function lockgen_reclaim(counter, timeouts, channel, publish, now)
    local expired = redis.call('zrangebyscore', timeouts, '-inf', now)
    if #expired == 0 then
        return 0
    end
    for i = 1, #expired, 1000 do
        redis.call('zrem', timeouts, unpack(expired, i, math.min(i + 999, #expired)))
    end
    local value = redis.call('incrby', counter, #expired)
    if value > 0 then
        redis.pcall(publish, channel, value)
    end
    return #expired
end

local function lockgen_nearest(timeouts)
    local head = redis.call('zrange', timeouts, 0, 0, 'withscores')
    if head[1] == nil then
        return nil
    end
    return tonumber(head[2])
end
