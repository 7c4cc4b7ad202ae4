-- read_release: drop one read hold of a read-write lock, then recompute the
-- lock's TTL from the readers still alive (Redisson's read unlock).
--
-- Counts as release.lua does: the client sends the owner's read hold count
-- before this release, so a resent copy of a release that already ran does
-- nothing, and nothing is written per request.
--
-- After the drop, every reader field left in the hash (a field with a
-- count c, other than "mode" and a "<owner>:write" field) is looked up by
-- the PTTL of its timeout keys "<KEYS[4]>:<field>:rwlock_timeout:<i>",
-- i = 1..c, as Redisson does. These names are built here rather than
-- passed in KEYS (the script cannot know the other readers in advance);
-- they carry the lock's hash tag, so they live in the lock's cluster slot.
-- This is the one exception to "every key a script touches is in KEYS".
-- Then, with the longest of those PTTLs:
--
--   read mode, some key alive   PEXPIRE the hash to it, so a crashed
--                               reader's field stops keeping the lock the
--                               moment its own lease runs out, however long
--                               the others renew the hash; if that cuts the
--                               TTL to less than half, publish "0" so a
--                               waiter sleeping on the old TTL looks again
--   read mode, none alive       delete the hash, publish "0" (a waiter,
--                               typically a writer, goes next)
--   write mode (a writer that   never shorten: the write hold counts on the
--   downgraded holds it)        TTL; only lengthen it to the longest PTTL
--
-- The releasing owner's remaining holds keep the longest lease any of its
-- holds had: when hold n is dropped and its timeout key outlives that of
-- hold n-1, hold n-1's key takes over its TTL (the client's deadline for
-- the owner's hold is the latest one of its acquisitions).
--
-- KEYS[1]  lock hash
-- KEYS[2]  channel: redisson_rwlock:{<lock>}
-- KEYS[3]  timeout key of the dropped hold: {<lock>}:<owner>:rwlock_timeout:<count>
-- KEYS[4]  prefix of every timeout key of this lock: "{<lock>}" (the
--          lock key itself when it already carries a hash tag)
-- ARGV[1]  owner token (the read field)
-- ARGV[2]  publish command: "publish" or "spublish"
-- ARGV[3]  the owner's read hold count before this release (>= 1)
--
-- Returns
--   nil  ARGV[1] holds no read hold as counted
--   0    dropped; the lock is still held (by this owner or others)
--   1    dropped, and no reader's timeout key is alive and no writer holds
--        the lock: lock deleted, one waiter woken (Redisson's unlock
--        message "0", typically a writer)
local expected = tonumber(ARGV[3])
local n = tonumber(redis.call('hget', KEYS[1], ARGV[1]))
if n == expected - 1 and n > 0 then
    return 0 -- an earlier copy of this release counted down
end
if n ~= expected then
    return nil
end
local function timeoutKey(field, i)
    return KEYS[4] .. ':' .. field .. ':rwlock_timeout:' .. i
end
if n > 1 then
    redis.call('hset', KEYS[1], ARGV[1], n - 1)
    local left = redis.call('pttl', KEYS[3])
    if left > 0 and redis.call('pttl', timeoutKey(ARGV[1], n - 1)) < left then
        redis.call('set', timeoutKey(ARGV[1], n - 1), n - 1, 'px', left)
    end
else
    redis.call('hdel', KEYS[1], ARGV[1])
end
redis.call('del', KEYS[3])

local mode = redis.call('hget', KEYS[1], 'mode')
local longest = -2
local fields = redis.call('hgetall', KEYS[1])
for j = 1, #fields, 2 do
    local field = fields[j]
    local count = tonumber(fields[j + 1])
    if count and field ~= 'mode' and string.sub(field, -6) ~= ':write' then
        for i = count, 1, -1 do
            longest = math.max(longest, redis.call('pttl', timeoutKey(field, i)))
        end
    end
end
local ttl = redis.call('pttl', KEYS[1])
if mode == 'write' then
    if ttl >= 0 and longest > ttl then
        redis.call('pexpire', KEYS[1], longest)
    end
    return 0
end
if longest > 0 then
    redis.call('pexpire', KEYS[1], longest)
    if longest < ttl / 2 then
        redis.pcall(ARGV[2], KEYS[2], '0')
    end
    return 0
end
redis.call('del', KEYS[1])
redis.pcall(ARGV[2], KEYS[2], '0')
return 1
