-- plain_semaphore_acquire: take n permits of a plain semaphore (Redisson
-- RSemaphore layout): a free count at the name and nothing else, so a
-- holder that crashes never gives its permits back.
--
-- KEYS[1]  free count: a string holding a decimal integer
-- ARGV[1]  n (>= 1)
--
-- Returns 1 when taken (the count went down by n), 0 when fewer than n
-- are free or the count is absent.
local value = redis.call('get', KEYS[1])
if value ~= false and tonumber(value) >= tonumber(ARGV[1]) then
    redis.call('decrby', KEYS[1], ARGV[1])
    return 1
end
return 0
