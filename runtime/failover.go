package runtime

import (
	"context"
	"slices"

	"github.com/redis/go-redis/v9"
)

// Following a Redis Cluster failover.
//
// When a master dies, the cluster promotes its replica within a few
// seconds (cluster-node-timeout and an election). go-redis learns of it
// only when it re-reads the slot map: on a MOVED or READONLY reply, or
// every ClusterStateReloadInterval (10 s by default). A dead master
// answers nothing, so until then every call for its slots goes on failing
// against it: renewals, acquisitions, releases and settlements, and the
// hub's subscriptions. A hold whose lock survived the promotion would be
// lost at its deadline, and a lock the failover freed would sit unused.
//
// So every place where a call fails without a reply from Redis tells
// slotMaps, which has each cluster client of the Client re-read its slot
// map at once (ReloadState), and those places retry as they do anyway:
// the watchdog's renewal within the hold's deadline (watchdog.go), a
// waiter's tries within its wait (wait.go), releases and settlements
// within their bound (client.go, settler.go), the hub's subscriptions
// (hub_conn.go). go-redis coalesces the reloads: one runs at a time, and
// those asked for meanwhile make one more after a 200 ms cooldown. While
// a node stays dead the slot map is therefore re-read about every 200 ms,
// and a promotion is seen within about that much.
//
// The Client has up to two cluster clients: the caller's (which the hub
// subscribes with too, see hubClient) and the watchdog's own renewal
// client (deadlineClient), which keeps a slot map of its own.
type slotMaps struct {
	clients []*redis.ClusterClient
}

// newSlotMaps keeps the distinct cluster clients among rdbs.
func newSlotMaps(rdbs ...redis.UniversalClient) slotMaps {
	var s slotMaps
	for _, rdb := range rdbs {
		if cc, ok := rdb.(*redis.ClusterClient); ok && !slices.Contains(s.clients, cc) {
			s.clients = append(s.clients, cc)
		}
	}
	return s
}

// failed is told of a call that ended with err: when no reply came from
// Redis (unreachable), the node may be dead and its slots served elsewhere
// by now, so the slot maps are re-read. It does not block.
func (s *slotMaps) failed(err error) {
	if len(s.clients) > 0 && unreachable(err) {
		s.reload()
	}
}

// reload has every cluster client re-read its slot map, in the background.
func (s *slotMaps) reload() {
	for _, cc := range s.clients {
		cc.ReloadState(context.Background())
	}
}
