package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// clusterMasters is the size of the bench's cluster: masters only, no
// replicas (nothing here fails over; the scenarios measure the steady state).
const clusterMasters = 3

// adminName is the CLIENT SETNAME of the bench's own bookkeeping clients
// (INFO, FLUSHALL, CLIENT LIST), so the connection counts can leave them out.
const adminName = "bench-admin"

// backend is the Redis a contention scenario runs against: the single
// server, or the local cluster. Its admin clients (one per node, named
// adminName) read INFO and CLIENT LIST and flush; they are never counted
// for a library.
type backend struct {
	addrs   []string
	cluster bool
	admins  []*redis.Client
}

func newBackend(addrs []string, cluster bool) *backend {
	be := &backend{addrs: addrs, cluster: cluster}
	for _, a := range addrs {
		be.admins = append(be.admins, redis.NewClient(&redis.Options{Addr: a, ClientName: adminName}))
	}
	return be
}

func (be *backend) close() {
	for _, a := range be.admins {
		_ = a.Close()
	}
}

// warm connects the admin clients, so that their dials (HELLO) fall
// outside the windows whose commands are counted.
func (be *backend) warm() {
	for _, a := range be.admins {
		must(a.Ping(context.Background()).Err())
	}
}

// client is a row's own go-redis client at its defaults, with a command
// counter: a *redis.Client on the server, a *redis.ClusterClient that
// knows every node on the cluster.
func (be *backend) client() (redis.UniversalClient, *counter) {
	if !be.cluster {
		return newClient(be.addrs[0])
	}
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: be.addrs})
	cnt := &counter{}
	rdb.AddHook(cnt)
	return rdb, cnt
}

// commandStats is INFO commandstats summed over the nodes.
func (be *backend) commandStats(ctx context.Context) (cmdStats, error) {
	sum := make(cmdStats)
	for _, a := range be.admins {
		st, err := commandStats(ctx, a)
		if err != nil {
			return nil, err
		}
		for k, v := range st {
			sum[k] += v
		}
	}
	return sum, nil
}

// cpu is Redis' CPU time summed over the nodes.
func (be *backend) cpu(ctx context.Context) time.Duration {
	var d time.Duration
	for _, a := range be.admins {
		d += redisCPU(ctx, a)
	}
	return d
}

// flush empties every node (every lock is released by then).
func (be *backend) flush() {
	for _, a := range be.admins {
		must(a.FlushAll(context.Background()).Err())
	}
}

// addrsOf lists the addresses a go-redis client was built on, for the rows
// that bring a client of their own (rueidislock).
func addrsOf(rdb redis.UniversalClient) []string {
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		return c.Options().Addrs
	case *redis.Client:
		return []string{c.Options().Addr}
	}
	panic(fmt.Sprintf("bench: no addresses for a %T", rdb))
}

// startCluster starts clusterMasters cluster-enabled redis-servers on free
// loopback ports, gives each an equal share of the 16384 slots
// (CLUSTER ADDSLOTSRANGE), joins them (CLUSTER MEET) and returns once every
// node reports cluster_state:ok and knows every other. No redis-cli is
// needed. The caller stops the servers.
func startCluster(bin string) ([]*server, error) {
	var nodes []*server
	fail := func(err error) ([]*server, error) {
		for _, s := range nodes {
			s.stop()
		}
		return nil, err
	}
	for range clusterMasters {
		port, err := freeClusterPort()
		if err != nil {
			return fail(err)
		}
		s, err := startRedisOn(bin, port, "cluster",
			"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000")
		if err != nil {
			return fail(err)
		}
		nodes = append(nodes, s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var admins []*redis.Client
	defer func() {
		for _, a := range admins {
			_ = a.Close()
		}
	}()
	for i, s := range nodes {
		a := redis.NewClient(&redis.Options{Addr: s.addr, ClientName: adminName})
		admins = append(admins, a)
		lo, hi := i*16384/clusterMasters, (i+1)*16384/clusterMasters-1
		if err := a.ClusterAddSlotsRange(ctx, lo, hi).Err(); err != nil {
			return fail(fmt.Errorf("cluster node %s: CLUSTER ADDSLOTSRANGE %d %d: %w", s.addr, lo, hi, err))
		}
	}
	for _, s := range nodes[1:] {
		if err := admins[0].ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(s.port)).Err(); err != nil {
			return fail(fmt.Errorf("cluster: CLUSTER MEET %s: %w", s.addr, err))
		}
	}
	for {
		err := clusterReady(ctx, admins)
		if err == nil {
			return nodes, nil
		}
		if ctx.Err() != nil {
			return fail(fmt.Errorf("cluster on %v did not come up: %w", addrsOfServers(nodes), err))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// clusterReady checks that every node sees a healthy cluster of all the
// nodes, with every slot served.
func clusterReady(ctx context.Context, admins []*redis.Client) error {
	for _, a := range admins {
		m, err := info(ctx, a, "cluster")
		if err != nil {
			return err
		}
		ci, err := a.ClusterInfo(ctx).Result()
		if err != nil {
			return err
		}
		f := parseFields(ci)
		if f["cluster_state"] != "ok" || f["cluster_slots_ok"] != "16384" || f["cluster_known_nodes"] != strconv.Itoa(len(admins)) {
			return fmt.Errorf("%s: cluster_state %s, slots ok %s, known nodes %s (cluster_enabled %s)",
				a.Options().Addr, f["cluster_state"], f["cluster_slots_ok"], f["cluster_known_nodes"], m["cluster_enabled"])
		}
		slots, err := a.ClusterSlots(ctx).Result()
		if err != nil {
			return err
		}
		if len(slots) != len(admins) {
			return fmt.Errorf("%s: CLUSTER SLOTS lists %d ranges, want %d", a.Options().Addr, len(slots), len(admins))
		}
	}
	return nil
}

// freeClusterPort is a free loopback port whose cluster bus port (port +
// 10000) is free too.
func freeClusterPort() (int, error) {
	for range 100 {
		port, err := freePort()
		if err != nil {
			return 0, err
		}
		if port+10000 > 65535 {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port+10000))
		if err != nil {
			continue
		}
		l.Close()
		return port, nil
	}
	return 0, errors.New("no free port pair (port, port+10000) for a cluster node")
}

func addrsOfServers(ss []*server) []string {
	var a []string
	for _, s := range ss {
		a = append(a, s.addr)
	}
	return a
}
