-- semaphore_release: give back the permits of one acquisition of a
-- permit-expirable semaphore (Redisson RPermitExpirableSemaphore layout).
--
-- Idempotent: a resent copy finds the ids gone and changes nothing, so a
-- release never counts up twice. It also marks the acquire request done,
-- so a copy of the acquire still travelling cannot take the ids again.
--
-- KEYS[1]  free count
-- KEYS[2]  held permits: {<name>}:timeout
-- KEYS[3]  channel: redisson_sc:{<name>}
-- KEYS[4]  request marker of the acquisition (see semaphore_acquire.lua)
-- ARGV[1]  publish command: "publish", or "spublish" on a sharded cluster
-- ARGV[2]  the permit ids, concatenated (16 bytes each)
-- ARGV[3]  marker lifetime in milliseconds
--
-- Returns the number of ids that were still held and are now free (their
-- number is added to the free count, and the new count is published: it
-- wakes that many waiters). Fewer than the ids sent: the others ran out or
-- were deleted before the release.
local ids = ARGV[2]
local freed = 0
for i = 1, #ids, 16 do
    freed = freed + redis.call('zrem', KEYS[2], string.sub(ids, i, i + 15))
end
redis.call('set', KEYS[4], 'abort', 'px', ARGV[3])
if freed > 0 then
    local value = redis.call('incrby', KEYS[1], freed)
    redis.pcall(ARGV[1], KEYS[3], value)
end
return freed
