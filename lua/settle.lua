-- settle: decide the outcome of an acquire whose reply was lost, for
-- every script that counts holds (acquire.lua, fair_acquire.lua,
-- read_acquire.lua, write_acquire.lua).
--
-- The acquire may have run on the server even though the client saw a
-- timeout or a broken connection. Settling makes the outcome final: either
-- it took the lock (the owner's count is one above what the client sent;
-- the caller then holds it) or the request is marked aborted, so that a
-- copy of it still travelling to the server cannot take the lock later.
--
-- KEYS[1]  lock hash
-- KEYS[2]  request marker of the attempt: lockgen_latch:{<lock>}:<request id>
-- ARGV[1]  the hash field of the owner's hold (owner token; "<owner>:write"
--          for a write hold)
-- ARGV[2]  the owner's hold count the attempt was sent with
-- ARGV[3]  marker lifetime in milliseconds
--
-- Returns
--   1  the request took the lock
--   0  it did not, and now never will
local mark = redis.call('get', KEYS[2])
if mark ~= 'abort' then
    local n = tonumber(redis.call('hget', KEYS[1], ARGV[1])) or 0
    if n == tonumber(ARGV[2]) + 1 then
        if not mark then
            redis.call('set', KEYS[2], 'took', 'px', ARGV[3])
        end
        return 1
    end
end
redis.call('set', KEYS[2], 'abort', 'px', ARGV[3])
return 0
