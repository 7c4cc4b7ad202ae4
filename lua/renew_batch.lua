-- renew_batch: extend the lease of many held locks in one call (the watchdog).
--
-- All keys of one call hash to one cluster slot; the caller groups them and
-- sends at most MaxBatch (lua.go) keys per call.
--
-- KEYS     for each hold, in order: the lock hash, then the hold's extra
--          keys: the rwlock_timeout keys 1..n of a read hold with n holds,
--          in that order (none for other holds)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  the layout of the holds' arguments: "" when every hold is a
--          lock hash without extra keys (the common case: one argument
--          per hold), "x" otherwise (two per hold)
-- ARGV     then, per hold: the hash field that proves it (owner token, or
--          "<owner>:write" for a write hold); with layout "x" followed by
--          its number of extra keys; or, for the permits of one semaphore
--          acquisition, the permit ids concatenated (16 bytes each) and -1:
--          the hold's key is then the semaphore's {<name>}:timeout sorted
--          set, and renewing sets each id's score to the server's now
--          (TIME) + lease, never lower than it was (Redisson
--          RPermitExpirableSemaphore's updateLeaseTime with the same
--          never-shorten rule as the hashes)
--
-- Returns a string with one byte per hold, in order:
--   "1"  the field exists: the hash lease was extended (never shortened,
--        another holder may have a longer one; a key without a TTL keeps
--        none) and so were the extra keys (never shortened either: a read
--        release recomputes the lock's TTL from them, so they carry what
--        the hold counts on, such as an outer fixed lease longer than this
--        one). A key that ran out is not revived: it outlived the hold's
--        deadline, and the watchdog's list of keys may be older than a
--        release that just deleted one
--   "0"  the hold is gone (expired, deleted, taken by someone else): not
--        touched (for permits: one of the ids is no longer held)
--   "2"  held, but Redis refused the renewal (permits: ZADD is refused
--        with OOM under maxmemory while the call has written nothing,
--        where PEXPIRE is not): not confirmed, the watchdog tries again.
--        Raised, the refusal ended the call with no hold of it renewed
--
-- A hold's key of another type (someone deleted the lock and wrote a
-- string there, say) is a hold gone: "0", and the batch's other holds are
-- renewed. Its HEXISTS or ZSCORE is a redis.pcall for that: a WRONGTYPE error
-- raised by call would end the script with nothing renewed, every round,
-- until all holds sent with that key were lost.
--
-- Cost: a plain hold is one HEXISTS and one PEXPIRE ... GT (pcall and
-- call cost Redis the same). The first PEXPIRE finds out whether the
-- server knows GT. Before Redis 7.0 (no GT) it is refused and the script
-- reads each key's PTTL first instead, with the same rule.
-- try is redis.pcall: it returns an error reply as a value (a table).
local call, try = redis.call, redis.pcall
local lease = tonumber(ARGV[1])
-- PEXPIRE's argument, formatted once rather than per key
local lease_ms = string.format('%d', lease)
local renewed = {}
-- gt: whether PEXPIRE takes GT; nil until the first extension finds out.
local gt
-- extend sets key's TTL to lease unless it is longer already (or absent).
local function extend(key)
    if gt then
        call('pexpire', key, lease_ms, 'gt')
        return
    end
    if gt == nil then
        local r = try('pexpire', key, lease_ms, 'gt')
        gt = type(r) ~= 'table' or not r.err
        if gt then
            return
        end
    end
    local ttl = call('pttl', key)
    if ttl >= 0 and ttl < lease then
        call('pexpire', key, lease)
    end
end
-- The common layout, lock hashes only: one key and one field per hold.
if ARGV[2] == '' then
    for i = 3, #ARGV do
        local key = KEYS[i - 2]
        if try('hexists', key, ARGV[i]) == 1 then
            if gt then
                call('pexpire', key, lease_ms, 'gt')
            else
                extend(key)
            end
            renewed[i - 2] = '1'
        else
            renewed[i - 2] = '0'
        end
    end
    return table.concat(renewed)
end
-- A permit whose score has passed is not held any more, even before a
-- script reclaims it: it is never revived.
local function permits_held(zset, ids, now)
    for j = 1, #ids, 16 do
        local score = try('zscore', zset, string.sub(ids, j, j + 15))
        if type(score) ~= 'string' or tonumber(score) <= now then
            return false
        end
    end
    return true
end
local now
local k = 1
for i = 3, #ARGV, 2 do
    local extra = tonumber(ARGV[i + 1])
    if extra < 0 then
        if not now then
            local t = call('time')
            now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        end
        if permits_held(KEYS[k], ARGV[i], now) then
            local expiry = now + lease
            local result = '1'
            for j = 1, #ARGV[i], 16 do
                local id = string.sub(ARGV[i], j, j + 15)
                if tonumber(call('zscore', KEYS[k], id)) < expiry then
                    local r = try('zadd', KEYS[k], 'xx', expiry, id)
                    if type(r) == 'table' and r.err then
                        result = '2' -- refused: OOM while the call has written nothing
                        break
                    end
                end
            end
            renewed[#renewed + 1] = result
        else
            renewed[#renewed + 1] = '0'
        end
        extra = 0
    elseif try('hexists', KEYS[k], ARGV[i]) == 1 then
        extend(KEYS[k])
        for j = 1, extra do
            extend(KEYS[k + j])
        end
        renewed[#renewed + 1] = '1'
    else
        renewed[#renewed + 1] = '0'
    end
    k = k + 1 + extra
end
return table.concat(renewed)
