package robustness

// The hygiene checker: nothing left behind.
//
// Model: after the run, once every Client is closed and the leases of
// killed holders have run out, the lock server holds only data the user
// owns, which needs no TTL:
//
//   - counters: a semaphore's free count, a plain semaphore's, a latch's
//     (Limits.DataKeys; the keys of Limits.Permits are always data), and
//     fencing counters redisson_lock_token:{name} (no TTL, never reset,
//     design.md §8);
//   - a leased semaphore's held permits {name}:timeout, which should be
//     empty, i.e. absent, when no permit is held: a member whose lease is
//     still ahead is a permit held after every Client closed (a
//     violation); one whose lease is over is reclaimed by the next call on
//     the semaphore (noted).
//
// Everything else of lockgen or Redisson must be gone or expire on its
// own within hygieneTTL: a lock hash (reentrant, fair, fenced, read-write,
// a multi-lock's members: a hash under a name of the user's) still
// present is a violation with or without a TTL, since the leases are
// over; bookkeeping (fair queues redisson_lock_queue / _timeout, lockgen_*
// keys, redisson_unlock_latch*, rwlock_timeout keys, ...) without a TTL or
// with a longer one is a violation.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/redisnames"
)

// hygieneTTL is the longest TTL bookkeeping may have left: request
// markers live max(10s, 2*ReleaseTimeout), owner labels and fair waiters'
// records a WatchdogTimeout or a queue timeout.
func hygieneTTL(lim Limits) time.Duration { return max(2*lim.Watchdog, 15*time.Second) }

// CheckHygiene lists every key on the lock server (on every master of a
// cluster) and checks that only user data is left without a TTL. Checked
// counts keys.
func CheckHygiene(ctx context.Context, rdb redis.UniversalClient, lim Limits) Result {
	c := newCollector(CheckNameHygiene)
	keys, err := allKeys(ctx, rdb)
	if err != nil {
		c.add(Violation{Msg: fmt.Sprintf("cannot list the keys: %v", err)})
		return c.result()
	}
	slices.Sort(keys)
	bound := hygieneTTL(lim)
	timeouts := map[string]string{} // {sem}:timeout -> sem
	for sem := range lim.Permits {
		timeouts[redisnames.Suffix(sem, "timeout")] = sem
	}
	expiring := map[string]int{}
	data := 0
	for _, k := range keys {
		c.res.Checked++
		if sem, ok := timeouts[k]; ok {
			heldPermits(ctx, rdb, c, sem, k)
			continue
		}
		if isUserData(k, lim) {
			data++
			continue
		}
		typ, err := rdb.Type(ctx, k).Result()
		if err != nil {
			c.add(Violation{Msg: fmt.Sprintf("%s: TYPE: %v", k, err)})
			continue
		}
		ttl, err := rdb.PTTL(ctx, k).Result()
		if err != nil {
			c.add(Violation{Msg: fmt.Sprintf("%s: PTTL: %v", k, err)})
			continue
		}
		switch {
		case typ == "none" || ttl == -2: // go-redis keeps PTTL's -1 and -2 as ns
			// Expired since it was listed.
		case typ == "hash" && !bookkeeping(k):
			c.add(Violation{Msg: fmt.Sprintf("lock hash %s left behind after the leases ran out (TTL %s): %s", k, ttlString(ttl), fields(ctx, rdb, k))})
		case ttl < 0:
			c.add(Violation{Msg: fmt.Sprintf("%s (%s) has no TTL and is not user data", k, typ)})
		case ttl > bound:
			c.add(Violation{Msg: fmt.Sprintf("%s (%s) has a TTL of %v, more than %v", k, typ, ttl, bound)})
		default:
			expiring[family(k)]++
		}
	}
	c.note("%d keys of user data (no TTL needed)", data)
	for _, f := range sortedKeys(expiring) {
		c.note("%d %s keys left that expire within %v", expiring[f], f, bound)
	}
	return c.result()
}

// isUserData reports whether k is data the user owns.
func isUserData(k string, lim Limits) bool {
	if strings.HasPrefix(k, "redisson_lock_token:") {
		return true
	}
	if _, ok := lim.Permits[k]; ok {
		return true
	}
	return lim.DataKeys != nil && lim.DataKeys(k)
}

// bookkeeping reports whether k is named by lockgen or Redisson (rather
// than being a lock hash under the user's name).
func bookkeeping(k string) bool {
	return strings.HasPrefix(k, "lockgen_") || strings.HasPrefix(k, "redisson_") || strings.Contains(k, ":rwlock_timeout:")
}

// family is a key's kind, for the notes: its prefix up to the first ':'.
func family(k string) string {
	if strings.Contains(k, ":rwlock_timeout:") {
		return "rwlock_timeout"
	}
	if i := strings.IndexByte(k, ':'); i > 0 {
		return k[:i]
	}
	return k
}

// heldPermits checks a leased semaphore's held permits.
func heldPermits(ctx context.Context, rdb redis.UniversalClient, c *collector, sem, k string) {
	members, err := rdb.ZRangeWithScores(ctx, k, 0, -1).Result()
	if err != nil {
		c.add(Violation{Msg: fmt.Sprintf("%s: ZRANGE: %v", k, err)})
		return
	}
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		c.add(Violation{Msg: fmt.Sprintf("%s: TIME: %v", k, err)})
		return
	}
	expired, held := 0, 0
	var latest float64
	for _, m := range members {
		if m.Score <= float64(now.UnixMilli()) {
			expired++
			continue
		}
		held++
		latest = max(latest, m.Score)
	}
	if held > 0 {
		c.add(Violation{Msg: fmt.Sprintf("semaphore %s: %d permits still held in %s after every Client closed (leases up to %.0fms ahead)",
			sem, held, k, latest-float64(now.UnixMilli()))})
	}
	if expired > 0 {
		c.note("semaphore %s: %d expired permits in %s, reclaimed by the next call on it", sem, expired, k)
	}
}

// fields renders a hash's fields, for a message.
func fields(ctx context.Context, rdb redis.UniversalClient, k string) string {
	m, err := rdb.HGetAll(ctx, k).Result()
	if err != nil {
		return err.Error()
	}
	var out []string
	for f, v := range m {
		out = append(out, f+"="+v)
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

func ttlString(ttl time.Duration) string {
	if ttl < 0 {
		return "none"
	}
	return ttl.String()
}

// allKeys lists every key, on every master of a cluster.
func allKeys(ctx context.Context, rdb redis.UniversalClient) ([]string, error) {
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		return rdb.Keys(ctx, "*").Result()
	}
	var mu sync.Mutex
	var keys []string
	err := cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		k, err := node.Keys(ctx, "*").Result()
		mu.Lock()
		keys = append(keys, k...)
		mu.Unlock()
		return err
	})
	return keys, err
}
