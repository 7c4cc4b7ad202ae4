-- semaphore_settle: decide the outcome of a semaphore acquire whose reply
-- was lost (semaphore_acquire.lua). Either its permits are held (the caller
-- then holds them) or the attempt is marked aborted, so a copy of it still
-- travelling to the server cannot take permits later.
--
-- KEYS[1]  held permits: {<name>}:timeout
-- KEYS[2]  request marker of the attempt: lockgen_latch:{<name>}:<hex id>
-- ARGV[1]  the first permit id of the attempt (16 bytes)
-- ARGV[2]  marker lifetime in milliseconds
--
-- Returns
--   1  the attempt took its permits
--   0  it did not, and now never will
if redis.call('zscore', KEYS[1], ARGV[1]) then
    return 1
end
redis.call('set', KEYS[2], 'abort', 'px', ARGV[2])
return 0
