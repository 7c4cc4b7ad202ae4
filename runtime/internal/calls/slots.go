package calls

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/scripts"
	"github.com/redis/go-redis/v9"
)

// SlotMaps follows a Redis Cluster's failovers for the Client's calls.
// go-redis learns of a promoted replica only when it re-reads the slot map
// (on MOVED or READONLY, or every 10 s), and a dead master answers
// nothing: until then every call for its slots fails, and a hold whose
// lock survived the promotion would be lost at its deadline. So a call
// that fails without a reply has each cluster client of the Client (the
// caller's and the watchdog's) re-read its map; so does the hub when a
// channel's slot moved. A nil *SlotMaps does nothing.
type SlotMaps struct {
	clients []*redis.ClusterClient
	closed  <-chan struct{} // the Client's: no reload is started after Close

	mu    sync.Mutex
	trail *time.Timer // the trailing reload, reset by every Reload
}

// trailingReload is how long after the last failure the maps are re-read
// once more: past go-redis' 200 ms cooldown, so the reload runs then.
const trailingReload = 250 * time.Millisecond

// NewSlotMaps keeps the distinct cluster clients among rdbs.
func NewSlotMaps(closed <-chan struct{}, rdbs ...redis.UniversalClient) *SlotMaps {
	s := &SlotMaps{closed: closed}
	for _, rdb := range rdbs {
		if cc, ok := rdb.(*redis.ClusterClient); ok && !slices.Contains(s.clients, cc) {
			s.clients = append(s.clients, cc)
		}
	}
	return s
}

// Failed is told of a call that ended with err: without a reply, or
// refused for a passing state (scripts.Refused), it calls Reload.
func (s *SlotMaps) Failed(err error) {
	if scripts.Unreachable(err) || scripts.Refused(err) {
		s.Reload()
	}
}

// Reload has every cluster client re-read its slot map, now and
// trailingReload after the last Reload (the failures stop as soon as one
// client has the new map). It does not block.
func (s *SlotMaps) Reload() {
	if s == nil || len(s.clients) == 0 {
		return
	}
	s.mu.Lock()
	if s.trail == nil {
		s.trail = time.AfterFunc(trailingReload, s.reloadNow)
	} else {
		s.trail.Reset(trailingReload)
	}
	s.mu.Unlock()
	s.reloadNow()
}

func (s *SlotMaps) reloadNow() {
	select {
	case <-s.closed:
		return
	default:
	}
	for _, cc := range s.clients {
		cc.ReloadState(context.Background())
	}
}
