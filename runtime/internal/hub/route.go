package hub

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime/internal/scripts"
)

// Sharded pub/sub on a Redis Cluster: one connection per master.
//
// A shard channel lives on its slot's master, and one connection may carry
// channels of any number of its slots (one SSUBSCRIBE must not name two:
// CROSSSLOT). One connection per master, not a pool: the node serves a
// connection's commands one at a time anyway, and a lock's wake-ups cannot
// overtake each other on one connection. It is a PubSub of the hub's own
// client for that master (ownLocked), not of the ClusterClient, whose
// PubSub picks its node once and, reconnecting, sends every channel in one
// SSUBSCRIBE; here a failed connection's channels are subscribed again one
// by one (conn.go), each on its slot's master as the slot map then says.
//
// Placement: the slot map may have to be loaded, so not under l.mu:
// placeLocked queues a channel and the router goroutine places it (its
// waiters are not ready meanwhile).
//
// Moved slots: when a slot leaves a master, the master unsubscribes its
// shard channels (notices the hub did not ask for), and a subscribe sent
// there is refused with MOVED. Either way that slot's channels on the
// connection are placed again, once the re-read slot map shows the move
// (mapWait at most), so as not to send them back. Their waiters are woken
// at once (a release meanwhile published to no one), and again by the new
// confirmation. A dead master is a failed connection (conn.go).

const (
	// mapWait bounds how long a channel whose slot moved waits for the
	// slot map to show the move before it is placed where the map says.
	mapWait = maxBackoff
	mapPoll = 10 * time.Millisecond // how often the router looks at the map meanwhile
)

// A placement is a channel waiting for its node.
type placement struct {
	e *entry
	// from is the node its slot left, to the one a MOVED reply named
	// ("": none), since when it waits for the map to show that.
	from, to string
	since    time.Time
	node     *redis.Client // its master, once the router found it
}

// waits reports whether p should wait for the slot map to show its move,
// at now, when the map routes it to addr.
func (p *placement) waits(addr string, now time.Time) bool {
	if p.from == "" || now.Sub(p.since) >= mapWait {
		return false
	}
	if p.to != "" {
		return addr != p.to
	}
	return addr == p.from
}

// placeLocked queues p for the router. l.mu is held, the hub not closed.
func (l *links) placeLocked(p placement) {
	e := p.e
	e.conn = nil
	e.placing = true
	e.gen.Add(1) // not ready until confirmed where it goes
	l.unplaced = append(l.unplaced, p)
	if !l.routing {
		l.routing = true
		l.wg.Add(1)
		go l.routeLoop()
	}
	select {
	case l.routeKick <- struct{}{}:
	default:
	}
}

// moveSlotLocked takes every channel of slot off sc and queues it to be
// placed where the slot went (to, if a MOVED reply said), and returns
// their entries; sc is closed if left empty. l.mu is held.
func (l *links) moveSlotLocked(sc *subConn, slot int, to string) (woken []*entry) {
	if sc.dead || l.hub.closed.Load() {
		return nil
	}
	now := time.Now()
	for name, e := range sc.entries {
		if scripts.KeySlot(name) != slot {
			continue
		}
		delete(sc.entries, name)
		if sc.track != nil {
			sc.track.unwatch(e) // watched again where it goes
		}
		l.placeLocked(placement{e: e, from: sc.node, to: to, since: now})
		woken = append(woken, e)
	}
	// Nothing sc sent for the slot's channels is confirmed now: their
	// subscribes and unsubscribes get a MOVED reply or no confirmation to
	// count, those of channels that left meanwhile too, and a confirmation
	// still to come finds nothing pending.
	for _, sent := range []map[string]int{sc.pending, sc.unsubscribing} {
		for ch := range sent {
			if scripts.KeySlot(ch) == slot {
				delete(sent, ch)
			}
		}
	}
	if len(woken) > 0 {
		l.log.Debug("slot moved: its channels are placed again", "slot", slot, "from", sc.node, "to", to, "channels", len(woken))
	}
	if len(sc.entries) == 0 {
		l.dropLocked(sc)
	}
	return woken
}

// A slotMove is a cluster slot and the master a MOVED reply named for it.
type slotMove struct {
	slot int
	to   string
}

// slotsMoved places the channels of the slots a MOVED reply found gone
// from sc's master on their new master.
func (l *links) slotsMoved(sc *subConn, moves ...slotMove) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.byNode {
		return
	}
	for _, m := range moves {
		l.moveSlotLocked(sc, m.slot, m.to)
	}
}

// movedSlot reads a MOVED reply: the slot and the node that serves it.
func movedSlot(err error) (slot int, to string, ok bool) {
	to, ok = redis.IsMovedError(err)
	if !ok {
		return 0, "", false
	}
	f := strings.Fields(err.Error()) // MOVED <slot> <host:port>
	if len(f) < 2 {
		return 0, "", false
	}
	slot, perr := strconv.Atoi(f[1])
	if perr != nil {
		return 0, "", false
	}
	return slot, to, true
}

// routeLoop places the queued channels until Close.
func (l *links) routeLoop() {
	defer l.wg.Done()
	ctx := l.stop
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	var todo []placement
	for {
		select {
		case <-l.routeKick:
		case <-retry.C:
		case <-ctx.Done():
			return
		}
		l.mu.Lock()
		todo = append(todo, l.unplaced...)
		clear(l.unplaced)
		l.unplaced = l.unplaced[:0]
		l.mu.Unlock()

		// A moved channel waits for the map to show the move: read it
		// again (in the background; one in progress is followed by one more).
		if slices.ContainsFunc(todo, func(p placement) bool { return p.from != "" }) {
			l.slots.Reload()
		}
		lookupErr := l.locate(ctx, todo)
		todo = l.attach(todo)
		if lookupErr != nil {
			l.log.Debug("no master found for a channel's slot", "err", lookupErr)
			l.slots.Failed(lookupErr)
		}
		if len(todo) > 0 {
			d := mapPoll
			if lookupErr != nil {
				d = maxBackoff
			}
			retry.Reset(d)
		}
	}
}

// locate sets the master of each channel of todo as the slot map says
// (I/O only if the map was never loaded), unless its lookup fails or it
// must wait for the map to show a move; it returns the last failed lookup.
func (l *links) locate(ctx context.Context, todo []placement) (lookupErr error) {
	now := time.Now()
	for i := range todo {
		p := &todo[i]
		mctx, cancel := context.WithTimeout(ctx, connectTimeout)
		node, err := l.cc.MasterForKey(mctx, p.e.name)
		cancel()
		switch {
		case err != nil:
			lookupErr = err
		case !p.waits(node.Options().Addr, now):
			p.node = node
			if p.from != "" {
				l.log.Debug("moved channel placed", "channel", p.e.name, "node", node.Options().Addr, "waited", now.Sub(p.since))
			}
		}
	}
	return lookupErr
}

// attach puts the located channels of todo on their master's connection,
// and returns the others, but those unsubscribed meanwhile.
func (l *links) attach(todo []placement) []placement {
	l.mu.Lock()
	defer l.mu.Unlock()
	keep := todo[:0]
	for _, p := range todo {
		switch {
		case !p.e.placing || l.hub.closed.Load(): // unsubscribed meanwhile
		case p.node != nil:
			addr := p.node.Options().Addr
			l.connLocked(addr, l.ownLocked(addr, p.node)).addLocked(p.e)
		default:
			keep = append(keep, p)
		}
	}
	clear(todo[len(keep):])
	return keep
}
