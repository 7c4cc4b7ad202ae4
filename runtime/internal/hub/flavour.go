package hub

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime/internal/errs"
	"github.com/lockgen/lockgen/runtime/internal/scripts"
)

// pubSubProbeTimeout bounds ChooseSharded's probe, its retries included:
// Redisson's connectTimeout, and long enough for go-redis to load the
// slots past a paused node (it waits one out for its ReadTimeout, 3 s).
const pubSubProbeTimeout = 10 * time.Second

// ChooseSharded decides whether waiters use sharded pub/sub (forced: the
// caller's choice, nil for auto), and logs why at Debug level.
//
// Every client of one lock must use the same flavour, or neither side's
// unlock wakes the other: auto decides as Redisson's
// ShardedSubscriptionMode.AUTO does, sharded on a Redis Cluster that
// accepts PUBSUB SHARDNUMSUB, classic elsewhere. A cluster that does not
// answer the probe within pubSubProbeTimeout (a Client made as the
// cluster comes up) is an error wrapping errs.Unavailable, as Redisson
// does not start then: a guess could leave the Client deaf to every other
// client's unlocks for its whole life.
func ChooseSharded(rdb redis.UniversalClient, cluster bool, forced *bool, log *slog.Logger) (bool, error) {
	sharded, why, err := decideSharded(rdb, cluster, forced)
	if err != nil {
		return false, err
	}
	flavour := "classic"
	if sharded {
		flavour = "sharded"
	}
	log.Debug("pub/sub flavour chosen", "pubsub", flavour, "reason", why)
	return sharded, nil
}

func decideSharded(rdb redis.UniversalClient, cluster bool, forced *bool) (sharded bool, why string, _ error) {
	switch {
	case forced != nil && *forced:
		return true, "Options.PubSub is PubSubSharded", nil
	case forced != nil:
		return false, "Options.PubSub is PubSubClassic", nil
	case !cluster:
		return false, "not a Redis Cluster (Redisson uses classic pub/sub there too)", nil
	case manualSlots(rdb):
		// A Sentinel failover cluster client, or servers not in cluster
		// mode, which accept SPUBLISH too: Redisson's clients of them
		// (sentinel, master-slave) subscribe classic.
		return false, "slots from ClusterOptions.ClusterSlots, not a Redis Cluster (Redisson uses classic pub/sub there)", nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), pubSubProbeTimeout)
	defer cancel()
	err := probeSharded(ctx, rdb)
	switch {
	case err == nil:
		return true, "the cluster accepts PUBSUB SHARDNUMSUB, as Redisson probes", nil
	case scripts.IsReply(err) && !scripts.Refused(err):
		return false, fmt.Sprintf("the cluster refuses PUBSUB SHARDNUMSUB (%v), as Redisson probes", err), nil
	case errors.Is(err, redis.ErrClosed):
		return false, "", fmt.Errorf("%w: the Redis client is closed", errs.InvalidArgument)
	}
	return false, "", fmt.Errorf("%w: cannot tell whether the cluster has sharded pub/sub: PUBSUB SHARDNUMSUB got no answer within %v (the last: %w); "+
		"every client of a lock must use the same flavour: retry once the cluster answers, or set Options.PubSub "+
		"(PubSubSharded where Redisson's clients use sharded pub/sub: Redis 7 and later)", errs.Unavailable, pubSubProbeTimeout, err)
}

// manualSlots reports whether rdb is a cluster client whose slots come
// from ClusterOptions.ClusterSlots (redis.NewFailoverClusterClient sets it).
func manualSlots(rdb redis.UniversalClient) bool {
	cc, ok := rdb.(*redis.ClusterClient)
	return ok && cc.Options().ClusterSlots != nil
}

// probeSharded asks PUBSUB SHARDNUMSUB until the cluster answers (a
// reply, or an error reply that is not a passing refusal such as LOADING
// or CLUSTERDOWN: scripts.Refused) or ctx ends, and returns that answer,
// or the last error. go-redis sends each probe to a node it picks
// at random; a probe that has not come back when the next is due (20 ms
// doubling to 500 ms) stays out, and another goes, so neither a node that
// refuses connections nor one that is paused (go-redis waits out its
// ReadTimeout) decides alone. rdb must honour ctx deadlines
// (watchdog.DeadlineClient): probeSharded returns once the probes still
// out have ended.
func probeSharded(ctx context.Context, rdb redis.UniversalClient) error {
	const most = 32 // more than 10 s of probes at these intervals
	ctx, cancel := context.WithCancel(ctx)
	var out sync.WaitGroup
	defer out.Wait() // rdb honours ctx: the probes still out end with it
	defer cancel()
	answers := make(chan error, most)
	var last error = context.DeadlineExceeded
	every := 20 * time.Millisecond
	next := time.NewTimer(0)
	defer next.Stop()
	for sent := 0; ; {
		select {
		case err := <-answers:
			if err == nil || scripts.IsReply(err) && !scripts.Refused(err) || errors.Is(err, redis.ErrClosed) {
				return err
			}
			last = err
		case <-next.C:
			if sent < most {
				sent++
				out.Add(1)
				go func() {
					defer out.Done()
					answers <- rdb.Do(ctx, "PUBSUB", "SHARDNUMSUB").Err()
				}()
			}
			next.Reset(every)
			every = min(2*every, 500*time.Millisecond)
		case <-ctx.Done():
			return last
		}
	}
}
