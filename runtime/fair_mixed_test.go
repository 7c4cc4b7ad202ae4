package runtime_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime"
)

// fakeJava plays Redisson RFairLock clients on one fair lock, with
// Redisson's score arithmetic done by hand: a waiter's score is a chain
// (the last waiter's score, or now + the holder's PTTL, plus the wait
// timeout), every acquisition lowers each remaining score by the wait
// timeout, and an unlock pops heads whose score has passed without
// publishing to them, then wakes the head left.
type fakeJava struct {
	t    *testing.T
	rdb  redis.UniversalClient
	key  string
	wait int64 // Redisson's fairLockWaitTimeout in ms
}

func (j fakeJava) queue() string    { return "redisson_lock_queue:{" + j.key + "}" }
func (j fakeJava) timeouts() string { return "redisson_lock_timeout:{" + j.key + "}" }

func (j fakeJava) now() int64 { return time.Now().UnixMilli() }

// hold makes owner the holder with a lease of ms.
func (j fakeJava) hold(owner string, ms int64) {
	ctx := context.Background()
	j.rdb.HSet(ctx, j.key, owner, 1)
	j.rdb.PExpire(ctx, j.key, time.Duration(ms)*time.Millisecond)
}

// enqueue queues owner as a Redisson waiter does.
func (j fakeJava) enqueue(owner string) {
	ctx := context.Background()
	var base int64
	if last, err := j.rdb.LIndex(ctx, j.queue(), -1).Result(); err == nil {
		base = int64(j.rdb.ZScore(ctx, j.timeouts(), last).Val())
	} else {
		base = j.now() + j.rdb.PTTL(ctx, j.key).Val().Milliseconds()
	}
	j.rdb.ZAdd(ctx, j.timeouts(), redis.Z{Score: float64(base + j.wait), Member: owner})
	j.rdb.RPush(ctx, j.queue(), owner)
}

// prune pops heads whose score has passed, publishing nothing.
func (j fakeJava) prune() {
	ctx := context.Background()
	for {
		head, err := j.rdb.LIndex(ctx, j.queue(), 0).Result()
		if err != nil || j.rdb.ZScore(ctx, j.timeouts(), head).Val() > float64(j.now()) {
			return
		}
		j.rdb.ZRem(ctx, j.timeouts(), head)
		j.rdb.LPop(ctx, j.queue())
	}
}

// acquire: the head owner takes the free lock; every remaining score
// drops by the wait timeout.
func (j fakeJava) acquire(owner string, ms int64) {
	ctx := context.Background()
	j.prune()
	if head := j.rdb.LIndex(ctx, j.queue(), 0).Val(); head != owner || j.rdb.Exists(ctx, j.key).Val() != 0 {
		j.t.Fatalf("fake Java waiter %s cannot take the lock (head %q)", owner, head)
	}
	j.rdb.LPop(ctx, j.queue())
	j.rdb.ZRem(ctx, j.timeouts(), owner)
	for _, w := range j.rdb.ZRange(ctx, j.timeouts(), 0, -1).Val() {
		j.rdb.ZIncrBy(ctx, j.timeouts(), -float64(j.wait), w)
	}
	j.hold(owner, ms)
}

// unlock: the holder's last release; stale heads popped, the head left woken.
func (j fakeJava) unlock() {
	ctx := context.Background()
	j.prune()
	j.rdb.Del(ctx, j.key)
	if head, err := j.rdb.LIndex(ctx, j.queue(), 0).Result(); err == nil {
		j.rdb.Publish(ctx, "redisson_lock__channel:{"+j.key+"}:"+head, "0")
	}
}

// A lockgen waiter queued behind a Redisson waiter keeps its place through
// Redisson's arithmetic: when the Redisson waiter takes the lock and lowers
// every score by its wait timeout, the lockgen waiter's score stays ahead
// of the clock, so Redisson's unlock wakes it instead of popping it as
// stale, and it takes the lock at once rather than at the old holder's TTL.
func TestFairWaiterBehindARedissonWaiterSurvivesItsScoreArithmetic(t *testing.T) {
	e := newEnv(t, nil)
	ctx := ctxT(t)
	j := fakeJava{t: t, rdb: e.rdb, key: "mixed", wait: 300000}
	j.hold("java-holder:1", 30000)
	j.enqueue("java-waiter:1")
	type result struct {
		at  time.Time
		err error
	}
	got := make(chan result, 1)
	m := e.c.FairLock("mixed", runtime.LockOptions{})
	go func() {
		h, err := m.TryLock(ctx, 8*time.Second, runtime.Watchdog)
		got <- result{time.Now(), err}
		if err == nil {
			_ = m.Unlock(h)
		}
	}()
	eventually(t, 5*time.Second, "lockgen waiter queued", func() bool { return e.rdb.LLen(ctx, j.queue()).Val() == 2 })
	time.Sleep(50 * time.Millisecond) // it sleeps on the holder's 30s

	j.unlock()                        // the holder leaves; the Redisson waiter is woken
	j.acquire("java-waiter:1", 30000) // and takes the lock: scores drop by 5 min
	time.Sleep(100 * time.Millisecond)
	j.unlock()
	free := time.Now()

	res := <-got
	if res.err != nil {
		t.Fatalf("lockgen waiter: %v (queue %v, scores %v, now %d)", res.err,
			e.rdb.LRange(ctx, j.queue(), 0, -1).Val(), e.rdb.ZRangeWithScores(ctx, j.timeouts(), 0, -1).Val(), j.now())
	}
	if d := res.at.Sub(free); d > 1500*time.Millisecond {
		t.Fatalf("lockgen waiter took the lock %v after it was free, want about at once", d)
	}
	eventually(t, 2*time.Second, "no keys left", func() bool { return len(keysLeft(t, e.rdb)) == 0 })
}
