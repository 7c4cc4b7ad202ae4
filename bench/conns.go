package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// connCount is how many connections one process holds to each node of a
// backend, while its row's workers run.
//
// It is counted on both ends. The process lists its own TCP sockets
// (/proc/self/fd → socket inodes → /proc/self/net/tcp), which gives the
// local ports of every connection it has open, whichever library or client
// inside it opened them (go-redis pools, lockgen's pub/sub and watchdog
// clients, rueidis). Then CLIENT LIST on every node keeps the clients whose
// address is 127.0.0.1:<one of those ports>, leaving out the bench's own
// admin clients (CLIENT SETNAME adminName). So a connection is counted once
// the server has it, only for the process that holds it, and no library has
// to cooperate (name its connections, expose pool stats).
type connCount struct {
	Nodes  []int // per node, in backend order
	PubSub int   // of them, in pub/sub mode (sub, psub or ssub > 0)
}

func (c connCount) total() int {
	n := 0
	for _, x := range c.Nodes {
		n += x
	}
	return n
}

// String is "total (n1/n2/n3, p pub/sub)".
func (c connCount) String() string {
	parts := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		parts[i] = strconv.Itoa(n)
	}
	return fmt.Sprintf("%d (%s, %d pub/sub)", c.total(), strings.Join(parts, "/"), c.PubSub)
}

// countConns counts this process's connections to every node of be.
func (be *backend) countConns(ctx context.Context) (connCount, error) {
	ports, err := ownTCPPorts()
	if err != nil {
		return connCount{}, err
	}
	c := connCount{Nodes: make([]int, len(be.admins))}
	for i, a := range be.admins {
		list, err := a.ClientList(ctx).Result()
		if err != nil {
			return connCount{}, err
		}
		for _, line := range strings.Split(list, "\n") {
			f := clientFields(line)
			host, port, ok := strings.Cut(f["addr"], ":")
			if !ok || host != "127.0.0.1" || f["name"] == adminName {
				continue
			}
			if p, err := strconv.Atoi(port); err != nil || !ports[p] {
				continue
			}
			c.Nodes[i]++
			if positive(f["sub"]) || positive(f["psub"]) || positive(f["ssub"]) {
				c.PubSub++
			}
		}
	}
	return c, nil
}

// clientFields splits one CLIENT LIST line into its key=value fields.
func clientFields(line string) map[string]string {
	m := make(map[string]string)
	for _, kv := range strings.Fields(line) {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

func positive(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n > 0
}

// ownTCPPorts is the set of local ports of this process's TCP sockets.
func ownTCPPorts() (map[int]bool, error) {
	inodes := make(map[string]bool)
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil, err
	}
	for _, fd := range fds {
		link, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err != nil {
			continue // closed since ReadDir
		}
		if in, ok := strings.CutPrefix(link, "socket:["); ok {
			inodes[strings.TrimSuffix(in, "]")] = true
		}
	}
	ports := make(map[int]bool)
	for _, table := range []string{"/proc/self/net/tcp", "/proc/self/net/tcp6"} {
		f, err := os.Open(table)
		if err != nil {
			continue // no IPv6
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // header
		for sc.Scan() {
			// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
			fs := strings.Fields(sc.Text())
			if len(fs) < 10 || !inodes[fs[9]] {
				continue
			}
			_, hexPort, ok := strings.Cut(fs[1], ":")
			if !ok {
				continue
			}
			if p, err := strconv.ParseInt(hexPort, 16, 32); err == nil {
				ports[int(p)] = true
			}
		}
		f.Close()
	}
	return ports, nil
}

// sampler returns a func that appends this process's connection count to
// *into, or nil on a single server (its tables have no connection column).
func (be *backend) sampler(into *[]connCount) func() {
	if !be.cluster {
		return nil
	}
	return func() {
		c, err := be.countConns(context.Background())
		must(err)
		*into = append(*into, c)
	}
}
