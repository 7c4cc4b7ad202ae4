-- latch_count_down: count a count-down latch down by one (Redisson
-- RCountDownLatch countDown).
--
-- A latch that is not armed is not armed by this: DECR of an absent key
-- makes -1, which is deleted at once, and nothing is published.
--
-- KEYS[1]  count
-- KEYS[2]  channel: redisson_countdownlatch__channel__{<name>}
-- ARGV[1]  publish command: "publish", or "spublish" on a sharded cluster
--
-- Returns the count after this call: 0 means this call released the
-- latch (the key is deleted and "0" published: it wakes every waiter);
-- < 0 means the latch was not armed.
local v = redis.call('decr', KEYS[1])
if v <= 0 then
    redis.call('del', KEYS[1])
end
if v == 0 then
    redis.pcall(ARGV[1], KEYS[2], '0')
end
return v
