package redistest

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// syncTimeout bounds a replica's initial sync: an empty data set syncs in
// milliseconds, but a loaded CI machine can be slow to schedule the fork.
const syncTimeout = 20 * time.Second

// StartReplicated starts a master and a replica of it (--replicaof) and
// returns once the replica's link is up and the master counts it as online,
// so WAIT 1 is answered by it. opts apply to both servers.
//
// Restart re-applies the start-up arguments: a restarted replica replicates
// the original master's port again.
func StartReplicated(tb testing.TB, opts ...Option) (master, replica *Server) {
	tb.Helper()
	master = newServer(tb, opts...)
	launch(tb, master)
	replica = newServer(tb, append(slices.Clip(opts), Arg("--replicaof", "127.0.0.1", strconv.Itoa(master.Port())))...)
	launch(tb, replica)
	replica.WaitForSync(tb, syncTimeout)
	return master, replica
}

// WaitForSync waits until s, a replica, has its link to its master up and
// the master lists it as online (the state in which WAIT counts it), e.g.
// after the replica or its master was restarted or resumed.
func (s *Server) WaitForSync(tb testing.TB, timeout time.Duration) {
	tb.Helper()
	waitUntil(tb, timeout, "replica "+s.Addr()+" in sync", func(ctx context.Context) error {
		return replicaSynced(ctx, s)
	})
}

// replicaSynced reports (as a nil error) that s is a replica whose link to
// its master is up and whose master lists it as online, the state in which
// WAIT counts it.
func replicaSynced(ctx context.Context, s *Server) error {
	info, err := s.control().Info(ctx, "replication").Result()
	if err != nil {
		return fmt.Errorf("%s: %w", s.Addr(), err)
	}
	if role := infoField(info, "role"); role != "slave" {
		return fmt.Errorf("%s: role %q, want slave", s.Addr(), role)
	}
	if link := infoField(info, "master_link_status"); link != "up" {
		return fmt.Errorf("%s: master_link_status %q", s.Addr(), link)
	}
	master := net.JoinHostPort(infoField(info, "master_host"), infoField(info, "master_port"))
	mc := controlClient(master)
	defer mc.Close()
	minfo, err := mc.Info(ctx, "replication").Result()
	if err != nil {
		return fmt.Errorf("master %s of %s: %w", master, s.Addr(), err)
	}
	if !strings.Contains(minfo, fmt.Sprintf("port=%d,state=online", s.Port())) {
		return fmt.Errorf("master %s does not list %s as online", master, s.Addr())
	}
	return nil
}
