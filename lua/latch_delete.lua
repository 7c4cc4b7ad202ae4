-- latch_delete: delete a count-down latch (Redisson RCountDownLatch
-- delete) and publish "1", which wakes no waiter: a deleted latch is not
-- released, and its waiters keep waiting until it is armed and counted
-- down again, or their wait ends.
--
-- KEYS[1]  count
-- KEYS[2]  channel: redisson_countdownlatch__channel__{<name>}
-- ARGV[1]  publish command: "publish", or "spublish" on a sharded cluster
--
-- Returns 1 when the latch existed, 0 otherwise.
if redis.call('del', KEYS[1]) == 1 then
    redis.pcall(ARGV[1], KEYS[2], '1')
    return 1
end
return 0
