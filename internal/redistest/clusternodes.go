package redistest

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
)

// clusterNode is one line of CLUSTER NODES: how the node that answered sees
// a node of the cluster.
type clusterNode struct {
	id       string
	port     int
	myself   bool
	replica  bool
	failing  bool   // flagged fail or fail? (pfail)
	masterID string // "-" for a master
	slots    []string
}

// clusterNodes asks s for its view of the cluster.
func (s *Server) clusterNodes(ctx context.Context) ([]clusterNode, error) {
	text, err := s.control().ClusterNodes(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("%s: CLUSTER NODES: %w", s.Addr(), err)
	}
	view, err := parseClusterNodes(text)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Addr(), err)
	}
	return view, nil
}

// parseClusterNodes reads
// "<id> <ip:port@cport[,hostname]> <flags> <master> <ping-sent> <pong-recv> <epoch> <link> <slot>...".
// A node still in handshake or without an address is an error: the cluster
// has not formed yet.
func parseClusterNodes(text string) ([]clusterNode, error) {
	var view []clusterNode
	for line := range strings.SplitSeq(strings.TrimSpace(text), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			return nil, fmt.Errorf("CLUSTER NODES line %q: too few fields", line)
		}
		hostPort, _, _ := strings.Cut(f[1], "@")
		_, p, err := net.SplitHostPort(hostPort)
		if err != nil {
			return nil, fmt.Errorf("CLUSTER NODES line %q: %w", line, err)
		}
		port, err := strconv.Atoi(p)
		if err != nil {
			return nil, fmt.Errorf("CLUSTER NODES line %q: port: %w", line, err)
		}
		n := clusterNode{id: f[0], port: port, masterID: f[3]}
		for flag := range strings.SplitSeq(f[2], ",") {
			switch flag {
			case "myself":
				n.myself = true
			case "slave":
				n.replica = true
			case "fail", "fail?":
				n.failing = true
			case "handshake", "noaddr":
				return nil, fmt.Errorf("node %s is %s", f[1], flag)
			}
		}
		for _, slot := range f[8:] {
			if !strings.HasPrefix(slot, "[") { // "[slot->-id]": a slot being migrated
				n.slots = append(n.slots, slot)
			}
		}
		view = append(view, n)
	}
	return view, nil
}

// serves reports whether n's slot ranges ("0-5460" or "42") hold slot.
func (n clusterNode) serves(slot int) bool {
	for _, r := range n.slots {
		lo, hi, found := strings.Cut(r, "-")
		if !found {
			hi = lo
		}
		a, errA := strconv.Atoi(lo)
		b, errB := strconv.Atoi(hi)
		if errA == nil && errB == nil && a <= slot && slot <= b {
			return true
		}
	}
	return false
}

// firstSlot is the lowest slot n serves, or clusterSlots if none.
func (n clusterNode) firstSlot() int {
	first := clusterSlots
	for _, r := range n.slots {
		lo, _, _ := strings.Cut(r, "-")
		if a, err := strconv.Atoi(lo); err == nil && a < first {
			first = a
		}
	}
	return first
}

// topology renders who serves which slots and who replicates whom, without
// the parts that legitimately differ between views (myself, failure flags,
// timestamps), so two nodes' views can be compared.
func topology(view []clusterNode) string {
	lines := make([]string, len(view))
	for i, n := range view {
		role := "master"
		if n.replica {
			role = "replica of " + n.masterID
		}
		lines[i] = fmt.Sprintf("%s :%d %s %s", n.id, n.port, role, strings.Join(n.slots, " "))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}
