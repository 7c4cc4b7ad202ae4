package inspect

import (
	"context"
	"net/url"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Connect opens the Redis deployment the URLs name, as go-redis parses
// them, with commands bounded by their ctx's deadline (the CLI's
// -timeout) as well as go-redis's read and write timeouts: one redis:// or rediss:// URL is a server; one with a master_name
// query parameter is a Sentinel failover client (the URL names the
// sentinels); several URLs, or cluster set, are the seed nodes of a Redis
// Cluster (a URL may also list more seeds with addr= parameters).
func Connect(urls []string, cluster bool) (redis.UniversalClient, error) {
	if len(urls) == 0 {
		return nil, usagef("no Redis to read: pass -redis redis://host:6379 (repeat it, or add -cluster, for a cluster)")
	}
	if !cluster && len(urls) == 1 {
		u, err := url.Parse(urls[0])
		if err != nil {
			return nil, usagef("-redis %q: %v", urls[0], err)
		}
		if u.Query().Has("master_name") {
			o, err := redis.ParseFailoverURL(urls[0])
			if err != nil {
				return nil, usagef("-redis %q: %v", urls[0], err)
			}
			o.ContextTimeoutEnabled = true
			return redis.NewFailoverClient(o), nil
		}
		o, err := redis.ParseURL(urls[0])
		if err != nil {
			return nil, usagef("-redis %q: %v", urls[0], err)
		}
		o.ContextTimeoutEnabled = true
		return redis.NewClient(o), nil
	}
	o, err := redis.ParseClusterURL(urls[0])
	if err != nil {
		return nil, usagef("-redis %q: %v", urls[0], err)
	}
	for _, s := range urls[1:] {
		more, err := redis.ParseClusterURL(s)
		if err != nil {
			return nil, usagef("-redis %q: %v", s, err)
		}
		o.Addrs = append(o.Addrs, more.Addrs...)
	}
	o.ContextTimeoutEnabled = true
	return redis.NewClusterClient(o), nil
}

// ConnectNodes opens one client per independent RedLock node.
func ConnectNodes(urls []string) ([]redis.UniversalClient, []string, error) {
	var nodes []redis.UniversalClient
	var addrs []string
	for _, s := range urls {
		o, err := redis.ParseURL(s)
		if err != nil {
			for _, n := range nodes {
				_ = n.Close()
			}
			return nil, nil, usagef("-red %q: %v", s, err)
		}
		o.ContextTimeoutEnabled = true
		nodes = append(nodes, redis.NewClient(o))
		addrs = append(addrs, o.Addr)
	}
	return nodes, addrs, nil
}

// NotClusterNode refuses a single-server client (one -redis URL without
// -cluster) that reaches a node of a Redis Cluster: read as one server,
// it would show that node's keys only, as if they were all, and fail
// with MOVED on a key of another node. A server that refuses INFO is
// taken for what the URL says; a probe out of time (ctx done) returns the
// ctx's error: the server may be a cluster node all the same.
func NotClusterNode(ctx context.Context, rdb redis.UniversalClient) error {
	c, ok := rdb.(*redis.Client)
	if !ok {
		return nil
	}
	info, err := c.Info(ctx, "cluster").Result()
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	if err == nil && strings.Contains(info, "cluster_enabled:1") {
		return usagef("-redis %s is a node of a Redis Cluster: add -cluster (read as one server, it would show that node's keys only)", c.Options().Addr)
	}
	return nil
}
