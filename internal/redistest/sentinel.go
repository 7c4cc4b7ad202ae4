package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// sentinelConfig is written to each sentinel's sentinel.conf, which the
// sentinel rewrites as it learns the topology. A master unanswered for
// down-after-milliseconds is subjectively down; two sentinels agreeing make
// it objectively down and one of them, elected by a majority, promotes the
// replica. A failed attempt is retried after twice failover-timeout.
const sentinelConfig = `sentinel resolve-hostnames no
sentinel monitor %[1]s 127.0.0.1 %[2]d 2
sentinel down-after-milliseconds %[1]s 1000
sentinel failover-timeout %[1]s 3000
sentinel parallel-syncs %[1]s 1
`

// Sentinel is a master, its replica and three sentinels monitoring them.
type Sentinel struct {
	sentinels []*Server
	// name is the master's name: lockgen-<the first master's port>, so
	// that the sentinels of another topology (a test running at the same
	// time) that reach this one's servers take nothing from its hellos.
	name string

	mu              sync.Mutex
	master, replica *Server
}

// StartSentinel starts a master and a replica (see StartReplicated; opts
// apply to both) and three sentinels (`redis-server sentinel.conf
// --sentinel`) monitoring them with quorum 2, and returns once every
// sentinel sees the master up, knows the replica and knows the other two
// sentinels, so a failover can happen.
func StartSentinel(tb testing.TB, opts ...Option) *Sentinel {
	tb.Helper()
	master, replica := StartReplicated(tb, opts...)
	st := &Sentinel{master: master, replica: replica, name: fmt.Sprintf("lockgen-%d", master.Port())}
	for range 3 {
		s := newServer(tb, Arg("--sentinel"))
		s.conf = filepath.Join(s.dir, "sentinel.conf")
		if err := os.WriteFile(s.conf, fmt.Appendf(nil, sentinelConfig, st.name, master.Port()), 0o600); err != nil {
			tb.Fatalf("redistest: %v", err)
		}
		st.sentinels = append(st.sentinels, s)
	}
	launch(tb, st.sentinels...)
	waitUntil(tb, syncTimeout, "sentinels ready to fail over", func(ctx context.Context) error {
		for _, s := range st.sentinels {
			m, err := s.control().Do(ctx, "SENTINEL", "MASTER", st.name).StringSlice()
			if err != nil {
				return fmt.Errorf("sentinel %s: %w", s.Addr(), err)
			}
			state := map[string]string{}
			for i := 0; i+1 < len(m); i += 2 {
				state[m[i]] = m[i+1]
			}
			for field, want := range map[string]string{
				"flags":               "master",
				"num-slaves":          "1",
				"num-other-sentinels": "2",
			} {
				if got := state[field]; got != want {
					return fmt.Errorf("sentinel %s: %s is %q, want %q", s.Addr(), field, got, want)
				}
			}
		}
		return nil
	})
	return st
}

// MasterName is the name the sentinels monitor the master under.
func (st *Sentinel) MasterName() string { return st.name }

// SentinelAddrs lists the sentinels' addresses.
func (st *Sentinel) SentinelAddrs() []string { return addrsOf(st.sentinels) }

// Sentinels returns the three sentinel processes.
func (st *Sentinel) Sentinels() []*Server { return slices.Clone(st.sentinels) }

// Master is the master as of start-up or the last WaitForFailover.
func (st *Sentinel) Master() *Server {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.master
}

// Replica is the replica as of start-up or the last WaitForFailover (after
// a failover: the old master, whether or not it runs).
func (st *Sentinel) Replica() *Server {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.replica
}

// Client returns a go-redis FailoverClient that finds the master through
// the sentinels, closed when the test ends.
func (st *Sentinel) Client(tb testing.TB) *redis.Client {
	tb.Helper()
	c := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:    st.name,
		SentinelAddrs: st.SentinelAddrs(),
		// Lock clients need calls that end by their ctx's deadline; a
		// failover client cannot be rebuilt with it by lockgen.
		ContextTimeoutEnabled: true,
	})
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// WaitForFailover waits until every running sentinel reports the replica's
// address for the master and the replica has taken the master role, then
// swaps Master and Replica and returns the new master. Kill, Stop or Pause
// the master first.
func (st *Sentinel) WaitForFailover(tb testing.TB, timeout time.Duration) *Server {
	tb.Helper()
	st.mu.Lock()
	old, promoted := st.master, st.replica
	st.mu.Unlock()
	waitUntil(tb, timeout, "sentinel failover to "+promoted.Addr(), func(ctx context.Context) error {
		asked := 0
		for _, s := range st.sentinels {
			if !s.Running() {
				continue
			}
			asked++
			addr, err := s.control().Do(ctx, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", st.name).StringSlice()
			if err != nil {
				return fmt.Errorf("sentinel %s: %w", s.Addr(), err)
			}
			if len(addr) != 2 || net.JoinHostPort(addr[0], addr[1]) != promoted.Addr() {
				return fmt.Errorf("sentinel %s reports master %v", s.Addr(), addr)
			}
		}
		if asked == 0 {
			return errors.New("no sentinel is running")
		}
		info, err := promoted.control().Info(ctx, "replication").Result()
		if err != nil {
			return fmt.Errorf("promoted %s: %w", promoted.Addr(), err)
		}
		if role := infoField(info, "role"); role != "master" {
			return fmt.Errorf("promoted %s has role %q", promoted.Addr(), role)
		}
		return nil
	})
	st.mu.Lock()
	st.master, st.replica = promoted, old
	st.mu.Unlock()
	return promoted
}
