-- renew_batch: extend the lease of many held locks in one call (the watchdog).
--
-- All keys of one call hash to one cluster slot; the caller groups them and
-- sends at most 100 keys per call.
--
-- KEYS[i]    lock hash of the i-th hold
-- ARGV[1]    lease in milliseconds
-- ARGV[i+1]  hash field that proves the i-th hold: the owner token
--
-- Returns an array with one integer per key:
--   1  the field exists: the lease was extended
--   0  the hold is gone (expired, deleted, taken by someone else): not touched
local renewed = {}
for i = 1, #KEYS do
    if redis.call('hexists', KEYS[i], ARGV[i + 1]) == 1 then
        redis.call('pexpire', KEYS[i], ARGV[1])
        renewed[i] = 1
    else
        renewed[i] = 0
    end
end
return renewed
