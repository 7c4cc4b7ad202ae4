package hub

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/scripts"
	"github.com/redis/go-redis/v9"
)

// pubSubProbeTimeout bounds ChooseSharded's probe.
const pubSubProbeTimeout = 3 * time.Second

// ChooseSharded decides whether waiters use sharded pub/sub (forced: the
// caller's choice, nil for auto), and logs why at Debug level.
//
// Every client of one lock must use the same flavour, or neither side's
// unlock wakes the other: auto decides as Redisson's
// ShardedSubscriptionMode.AUTO does, sharded on a Redis Cluster that
// accepts PUBSUB SHARDNUMSUB, classic elsewhere. The server version is a
// hint only when the probe gets no reply: INFO is refused by a common ACL
// (+@all -@dangerous) that allows the probe.
func ChooseSharded(rdb redis.UniversalClient, cluster bool, forced *bool, log *slog.Logger) bool {
	sharded, why := decideSharded(rdb, cluster, forced)
	flavour := "classic"
	if sharded {
		flavour = "sharded"
	}
	log.Debug("pub/sub flavour chosen", "pubsub", flavour, "reason", why)
	return sharded
}

func decideSharded(rdb redis.UniversalClient, cluster bool, forced *bool) (sharded bool, why string) {
	switch {
	case forced != nil && *forced:
		return true, "Options.PubSub is PubSubSharded"
	case forced != nil:
		return false, "Options.PubSub is PubSubClassic"
	case !cluster:
		return false, "not a Redis Cluster (Redisson uses classic pub/sub there too)"
	}
	ctx, cancel := context.WithTimeout(context.Background(), pubSubProbeTimeout)
	defer cancel()
	err := rdb.Do(ctx, "PUBSUB", "SHARDNUMSUB").Err()
	switch {
	case err == nil:
		return true, "the cluster accepts PUBSUB SHARDNUMSUB, as Redisson probes"
	case scripts.IsReply(err):
		return false, fmt.Sprintf("the cluster refuses PUBSUB SHARDNUMSUB (%v), as Redisson probes", err)
	}
	major, verr := serverMajor(ctx, rdb)
	if verr != nil {
		return false, fmt.Sprintf("PUBSUB SHARDNUMSUB got no reply (%v) and the server version is unknown (%v); Redisson would not start", err, verr)
	}
	return major >= 7, fmt.Sprintf("PUBSUB SHARDNUMSUB got no reply (%v); going by the server version %d", err, major)
}

// serverMajor is the major version of a server behind rdb, read with INFO.
func serverMajor(ctx context.Context, rdb redis.UniversalClient) (int, error) {
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return 0, err
	}
	_, rest, ok := strings.Cut(info, "redis_version:")
	if !ok {
		return 0, fmt.Errorf("no redis_version in INFO")
	}
	major, _, _ := strings.Cut(rest, ".")
	return strconv.Atoi(major)
}
