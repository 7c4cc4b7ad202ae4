-- settle: decide the outcome of an acquire whose reply was lost.
--
-- An acquire may have run on the server even though the client saw a
-- timeout or a broken connection. Settling makes the outcome final: either
-- the request took the lock (the caller then holds it) or it is marked
-- aborted, so that a copy of it still travelling to the server cannot take
-- the lock later.
--
-- KEYS[1]  request latch of the attempt: lockgen_latch:{<lock>}:<request id>
-- ARGV[1]  request id of the attempt to settle
-- ARGV[2]  latch lifetime in milliseconds
--
-- Returns
--   1  the request took the lock
--   0  it did not, and now never will
local seen = redis.call('get', KEYS[1])
if seen == ARGV[1] then
    return 1
end
redis.call('set', KEYS[1], 'abort:' .. ARGV[1], 'px', ARGV[2])
return 0
