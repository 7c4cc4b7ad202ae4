package calls

import (
	"context"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// reloadCounter is a cluster client whose slot map reloads are counted
// (its ClusterSlots func stands in for CLUSTER SLOTS: no server needed).
type reloadCounter struct {
	mu    sync.Mutex
	times []time.Time
}

func (r *reloadCounter) client(t *testing.T) *redis.ClusterClient {
	cc := redis.NewClusterClient(&redis.ClusterOptions{
		ClusterSlots: func(context.Context) ([]redis.ClusterSlot, error) {
			r.mu.Lock()
			r.times = append(r.times, time.Now())
			r.mu.Unlock()
			return []redis.ClusterSlot{{Start: 0, End: 16383, Nodes: []redis.ClusterNode{{Addr: "127.0.0.1:1"}}}}, nil
		},
	})
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

func (r *reloadCounter) reloads() []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Time(nil), r.times...)
}

// A failure without a reply re-reads every cluster client's slot map at
// once, and once more when no failure came for trailingReload; a reply
// (an error of Redis') re-reads nothing.
func TestSlotMapsReloadOnFailuresAndOnceAfter(t *testing.T) {
	var a, b reloadCounter
	closed := make(chan struct{})
	ca := a.client(t)
	s := NewSlotMaps(closed, ca, b.client(t), ca) // the caller's twice: once
	if len(s.clients) != 2 {
		t.Fatalf("%d clients, want 2", len(s.clients))
	}

	s.Failed(redis.Nil)
	s.Failed(nil)
	time.Sleep(50 * time.Millisecond)
	if n := len(a.reloads()); n != 0 {
		t.Fatalf("%d reloads after replies, want 0", n)
	}

	start := time.Now()
	s.Failed(io.EOF)
	time.Sleep(100 * time.Millisecond)
	s.Failed(io.ErrUnexpectedEOF) // during the cooldown: the trailing reload moves
	last := time.Now()
	time.Sleep(trailingReload + 400*time.Millisecond)
	for name, r := range map[string]*reloadCounter{"caller's": &a, "watchdog's": &b} {
		got := r.reloads()
		if len(got) < 2 {
			t.Fatalf("%s client: %d reloads, want one at once and one after the failures", name, len(got))
		}
		// At once: a reload only after trailingReload (250 ms) would be
		// the trailing one (50 ms here is as late as a loaded box runs a
		// goroutine).
		if d := got[0].Sub(start); d > trailingReload*4/5 {
			t.Errorf("%s client: first reload %v after the failure", name, d)
		}
		if end := got[len(got)-1]; end.Before(last.Add(trailingReload)) {
			t.Errorf("%s client: last reload %v after the last failure, want at least %v", name, end.Sub(last), trailingReload)
		}
	}

	// After Close nothing is reloaded; a nil SlotMaps (no cluster) does nothing.
	close(closed)
	n := len(a.reloads())
	s.Failed(io.EOF)
	time.Sleep(trailingReload + 100*time.Millisecond)
	if got := len(a.reloads()); got != n {
		t.Errorf("%d reloads after Close", got-n)
	}
	var none *SlotMaps
	none.Failed(io.EOF)
	none.Reload()
}
