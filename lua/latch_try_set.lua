-- latch_try_set: arm a count-down latch (Redisson RCountDownLatch
-- trySetCount): set the count only when the key is absent, and announce
-- the new count. A latch that reached zero was deleted, so this arms it
-- again; nothing else does (a waiter or a CountDown never creates it).
--
-- KEYS[1]  count: a string holding a decimal integer, no TTL
-- KEYS[2]  channel: redisson_countdownlatch__channel__{<name>}
-- ARGV[1]  count (>= 1)
-- ARGV[2]  publish command: "publish", or "spublish" on a sharded cluster
--
-- Returns 1 when armed (and "1", a new count, published: it wakes no
-- waiter), 0 when the latch was armed already.
if redis.call('exists', KEYS[1]) == 1 then
    return 0
end
redis.call('set', KEYS[1], ARGV[1])
redis.pcall(ARGV[2], KEYS[2], '1')
return 1
