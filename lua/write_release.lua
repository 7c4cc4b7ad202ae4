-- write_release: drop one write hold of a read-write lock.
--
-- Counts as release.lua does: the client sends the owner's write hold count
-- before this release, so a resent copy of a release that already ran does
-- nothing, and nothing is written per request.
--
-- KEYS[1]  lock hash
-- KEYS[2]  channel: redisson_rwlock:{<lock>}
-- KEYS[3]  prefix of the read holds' timeout keys: {<lock>} (as
--          read_release.lua's KEYS[4]); absent: the hash keeps its TTL
-- ARGV[1]  lease in milliseconds, re-applied while write holds remain
-- ARGV[2]  "<owner>:write"
-- ARGV[3]  publish command: "publish" or "spublish"
-- ARGV[4]  the owner's write hold count before this release (>= 1)
--
-- Returns
--   nil  ARGV[2] does not hold the write lock as counted
--   0    one write hold dropped, the owner still writes
--   1    the last write hold dropped: the lock is deleted, or left in read
--        mode when the owner still holds read holds (downgrade); waiting
--        readers are woken either way (Redisson's read-unlock message "1").
--        The read holds left keep the hash as long as their timeout keys
--        live, not the write hold's lease (Redisson keeps the write hold's
--        TTL: a read hold that ran out kept the lock for the rest of it);
--        when none of them lives any more the hash goes too
local expected = tonumber(ARGV[4])
local n = tonumber(redis.call('hget', KEYS[1], ARGV[2]))
if expected > 1 then
    if n == expected then
        redis.call('hset', KEYS[1], ARGV[2], n - 1)
        if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
            redis.call('pexpire', KEYS[1], ARGV[1])
        end
        return 0
    end
    if n == expected - 1 then
        return 0 -- an earlier copy of this release counted down
    end
    return nil
end
if n ~= 1 then
    return nil
end
redis.call('hdel', KEYS[1], ARGV[2])
if redis.call('hlen', KEYS[1]) == 1 then
    redis.call('del', KEYS[1])
else
    redis.call('hset', KEYS[1], 'mode', 'read')
    if KEYS[3] then
        local longest = -2
        local fields = redis.call('hgetall', KEYS[1])
        for j = 1, #fields, 2 do
            local count = tonumber(fields[j + 1])
            if count and fields[j] ~= 'mode' then
                for i = count, 1, -1 do
                    local key = KEYS[3] .. ':' .. fields[j] .. ':rwlock_timeout:' .. i
                    longest = math.max(longest, redis.call('pttl', key))
                end
            end
        end
        if longest > 0 then
            redis.call('pexpire', KEYS[1], longest)
        else
            redis.call('del', KEYS[1])
        end
    end
end
redis.pcall(ARGV[3], KEYS[2], '1')
return 1
