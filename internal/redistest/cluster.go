package redistest

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// clusterNodeTimeout is how long a node may go unanswered before the others
// mark it failing and its replica is promoted. Short so failover tests take
// a few seconds, long enough that a loaded machine causes no false alarms.
const clusterNodeTimeout = 1500 * time.Millisecond

// clusterTimeout bounds cluster creation and the wait for a healthy state.
const clusterTimeout = 30 * time.Second

// clusterSlots is the number of hash slots a healthy cluster covers.
const clusterSlots = 16384

// Cluster is a local Redis Cluster of 3 masters, each with 1 replica.
type Cluster struct {
	tb    testing.TB
	nodes []*Server
}

// StartCluster starts six cluster-enabled servers, joins them with
// `redis-cli --cluster create --cluster-replicas 1` and returns once every
// node reports cluster_state:ok, all 16384 slots are served and each
// replica is in sync with its master. opts apply to every node.
//
// A node's nodes.conf lives in its Dir and survives Kill and Stop, so
// Restart brings the node back into the cluster: a master that was failed
// over in the meantime rejoins as a replica of its successor.
func StartCluster(tb testing.TB, opts ...Option) *Cluster {
	tb.Helper()
	cli := binary(tb, "redis-cli")
	c := &Cluster{tb: tb}
	for range 6 {
		s := newServer(tb, opts...)
		s.bus = true
		s.args = append([]string{
			"--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(s.dir, "nodes.conf"),
			"--cluster-node-timeout", strconv.FormatInt(clusterNodeTimeout.Milliseconds(), 10),
			// Promote a replica however long its link was down, and keep
			// replicas where they are: tests decide the topology.
			"--cluster-replica-validity-factor", "0",
			"--cluster-allow-replica-migration", "no",
		}, s.args...)
		c.nodes = append(c.nodes, s)
	}
	launch(tb, c.nodes...)

	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		tb.Fatalf("redistest: redis-cli --cluster create: %v\n%s", err, out)
	}
	created := time.Now()
	waitUntil(tb, clusterTimeout, "cluster of 3 masters and 3 replicas", func(ctx context.Context) error {
		view, err := c.converged(ctx)
		if err != nil {
			// On a loaded machine a node sometimes never learns of one
			// peer through gossip (its handshake timed out): once gossip
			// had its time, introduce every node to it again.
			if time.Since(created) > 5*time.Second {
				c.meetAll(ctx)
			}
			return err
		}
		masters, replicas := 0, 0
		for _, n := range view {
			if n.replica {
				replicas++
			} else if len(n.slots) > 0 {
				masters++
			}
		}
		if masters != 3 || replicas != 3 {
			return fmt.Errorf("%d masters with slots and %d replicas, want 3 and 3", masters, replicas)
		}
		return nil
	})
	return c
}

// meetAll sends CLUSTER MEET for every other node to each node that does
// not know all six yet.
func (c *Cluster) meetAll(ctx context.Context) {
	for _, s := range c.nodes {
		info, err := s.control().ClusterInfo(ctx).Result()
		if err != nil || infoField(info, "cluster_known_nodes") == strconv.Itoa(len(c.nodes)) {
			continue
		}
		for _, peer := range c.nodes {
			if peer != s {
				_ = s.control().ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(peer.Port())).Err()
			}
		}
	}
}

// Client returns a cluster client that knows every node, closed when the
// test ends. It reloads the slot map every second instead of go-redis's
// default 10 s: go-redis does not reload when a master stops answering, so
// with the default a client keeps sending a dead master's slots to it for up
// to 10 s after the cluster has failed over.
func (c *Cluster) Client(tb testing.TB) *redis.ClusterClient {
	tb.Helper()
	cc := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                      c.Addrs(),
		ClusterStateReloadInterval: time.Second,
	})
	tb.Cleanup(func() { _ = cc.Close() })
	return cc
}

// Addrs lists every node's address, in start order.
func (c *Cluster) Addrs() []string { return addrsOf(c.nodes) }

// Nodes returns all six nodes in start order, whatever their role.
func (c *Cluster) Nodes() []*Server { return slices.Clone(c.nodes) }

// Masters returns the nodes that serve slots now, as a running node sees the
// cluster, ordered by their first slot. After a failover that is the
// promoted replica; a master that is down but not yet failed over is still
// listed. Call WaitForState first for a settled answer.
func (c *Cluster) Masters() []*Server {
	c.tb.Helper()
	view := c.view()
	slices.SortFunc(view, func(a, b clusterNode) int { return a.firstSlot() - b.firstSlot() })
	var masters []*Server
	for _, n := range view {
		if !n.replica && len(n.slots) > 0 {
			masters = append(masters, c.node(n.port))
		}
	}
	return masters
}

// OtherMaster returns a master that does not serve key's slot (the first
// in Masters' order): where a test migrates that slot to.
func (c *Cluster) OtherMaster(key string) *Server {
	c.tb.Helper()
	src := c.MasterForKey(key)
	for _, m := range c.Masters() {
		if m != src {
			return m
		}
	}
	return nil
}

// Replicas returns the nodes that replicate a master now (running or not),
// as a running node sees the cluster, in start order. A failed-over master
// is in neither list until it is restarted and rejoins as a replica.
func (c *Cluster) Replicas() []*Server {
	c.tb.Helper()
	replica := map[int]bool{}
	for _, n := range c.view() {
		replica[n.port] = n.replica
	}
	var replicas []*Server
	for _, s := range c.nodes {
		if replica[s.Port()] {
			replicas = append(replicas, s)
		}
	}
	return replicas
}

// MasterForKey returns the node serving key's slot now (CLUSTER KEYSLOT,
// then CLUSTER NODES), as a running node sees the cluster.
func (c *Cluster) MasterForKey(key string) *Server {
	c.tb.Helper()
	s := c.running()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	slot, err := s.control().ClusterKeySlot(ctx, key).Result()
	if err != nil {
		c.tb.Fatalf("redistest: CLUSTER KEYSLOT %q on %s: %v", key, s.Addr(), err)
	}
	for _, n := range c.view() {
		if !n.replica && n.serves(int(slot)) {
			return c.node(n.port)
		}
	}
	c.tb.Fatalf("redistest: no master serves slot %d of key %q", slot, key)
	return nil
}

// WaitForState waits until the cluster has settled: every running node
// reports cluster_state:ok with all 16384 slots served and all six nodes
// known, all running nodes agree on who serves which slots and who
// replicates whom, every slot is served by a running node that nobody
// flags as failing, and every running replica is in sync. Use it after
// killing a master (its replica gets promoted) or restarting a node (it
// rejoins).
func (c *Cluster) WaitForState(tb testing.TB, timeout time.Duration) {
	tb.Helper()
	waitUntil(tb, timeout, "cluster state ok", func(ctx context.Context) error {
		_, err := c.converged(ctx)
		return err
	})
}

// converged checks what WaitForState waits for and returns the agreed view.
func (c *Cluster) converged(ctx context.Context) ([]clusterNode, error) {
	var agreed []clusterNode
	var agreedBy *Server
	for _, s := range c.nodes {
		if !s.Running() {
			continue
		}
		info, err := s.control().ClusterInfo(ctx).Result()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.Addr(), err)
		}
		for field, want := range map[string]string{
			"cluster_state":       "ok",
			"cluster_slots_ok":    strconv.Itoa(clusterSlots),
			"cluster_known_nodes": strconv.Itoa(len(c.nodes)),
		} {
			if got := infoField(info, field); got != want {
				return nil, fmt.Errorf("%s: %s:%s, want %s", s.Addr(), field, got, want)
			}
		}
		view, err := s.clusterNodes(ctx)
		if err != nil {
			return nil, err
		}
		var self clusterNode
		for _, n := range view {
			peer := c.node(n.port)
			switch {
			case peer == nil:
				return nil, fmt.Errorf("%s knows a node on port %d that is not part of the cluster", s.Addr(), n.port)
			case n.failing && peer.Running():
				return nil, fmt.Errorf("%s flags running node %s as failing", s.Addr(), peer.Addr())
			case len(n.slots) > 0 && !peer.Running():
				return nil, fmt.Errorf("%s sees slots served by %s, which is down", s.Addr(), peer.Addr())
			}
			if n.myself {
				self = n
			}
		}
		if agreedBy == nil {
			agreed, agreedBy = view, s
		} else if a, b := topology(agreed), topology(view); a != b {
			return nil, fmt.Errorf("%s and %s disagree:\n%s\nversus\n%s", agreedBy.Addr(), s.Addr(), a, b)
		}
		if self.replica {
			if err := replicaSynced(ctx, s); err != nil {
				return nil, err
			}
		}
	}
	if agreedBy == nil {
		return nil, errors.New("no node is running")
	}
	return agreed, nil
}

// view returns CLUSTER NODES as the first running node that answers sees it.
func (c *Cluster) view() []clusterNode {
	c.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var errs []error
	for _, s := range c.nodes {
		if !s.Running() {
			continue
		}
		view, err := s.clusterNodes(ctx)
		if err == nil {
			return view
		}
		errs = append(errs, err)
	}
	c.tb.Fatalf("redistest: no running cluster node answers CLUSTER NODES: %v", errors.Join(errs...))
	return nil
}

// running returns the first running node.
func (c *Cluster) running() *Server {
	c.tb.Helper()
	for _, s := range c.nodes {
		if s.Running() {
			return s
		}
	}
	c.tb.Fatal("redistest: no cluster node is running")
	return nil
}

// node returns the node listening on port, or nil.
func (c *Cluster) node(port int) *Server {
	for _, s := range c.nodes {
		if s.Port() == port {
			return s
		}
	}
	return nil
}
