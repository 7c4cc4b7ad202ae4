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
// A shard channel lives on the master of its slot, and one connection may
// carry shard channels of any number of slots its node serves; only one
// SSUBSCRIBE may not name channels of two slots (CROSSSLOT). So the hub
// keeps a single connection per master however many slots are waited on
// (docs/scale-out.md has the budget), and not a pool: the node serves a
// connection's commands one at a time anyway, a message costs the reader a
// shard's mutex and no I/O, and a lock's wake-ups cannot overtake each
// other on one connection.
//
// The connection is a go-redis PubSub of a client of the hub's own for
// that master (nodeClientLocked, track.go), not of the ClusterClient: the
// latter's PubSub picks its node once, from the first channel, and both,
// after a reconnect of their own, send every channel in one SSUBSCRIBE,
// which a cluster refuses when they span slots. The hub never relies on
// that reconnect: any error drops the connection and its channels are
// subscribed again one by one (conn.go), each on its slot's master as the
// slot map then says.
//
// Placement. Which master serves a slot is read from the ClusterClient's
// slot map, which may have to be loaded, so it is not looked up under
// l.mu: a channel to subscribe is queued (placeLocked) and the router
// goroutine places it. Its waiters are not ready meanwhile (no
// confirmation), as for any subscribe in flight.
//
// Moved slots. When a slot leaves a master (a migration or a failover),
// the master unsubscribes every client from the slot's shard channels
// (sunsubscribe notices the hub did not ask for), and a subscribe sent to
// the old master is refused with MOVED <slot> <new master>. Either way
// every channel of that slot on the connection is placed again; the other
// slots' stay. The router has the slot map re-read and waits (mapWait at
// most) for it to show the move: a map re-read just before the move would
// send them back to the old master. A server-dropped channel's waiters are
// woken at once (a release on the new master meanwhile published to no
// one), and again by the new subscription's confirmation. A master that
// dies is a failed connection (conn.go): its channels are placed again
// once Config.Failed has had the map re-read.

// mapWait bounds how long a channel whose slot moved waits for the slot
// map to show the move before it is placed where the map says anyway (a
// refusal then makes it wait again): the bound of the backoff of a
// connection that fails young.
const mapWait = maxBackoff

// mapPoll is how often the router looks at the slot map again while a
// moved channel waits for it; go-redis re-reads the map at most every
// 200 ms however often it is asked.
const mapPoll = 10 * time.Millisecond

// A placement is a channel waiting for its node.
type placement struct {
	e *entry
	// reload: re-read the slot map before placing it (its connection
	// failed in a way a moved slot explains).
	reload bool
	// from is the node its slot left (""), to the one a MOVED reply named
	// (""), since when it waits for the map to show that.
	from, to string
	since    time.Time
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

// placeLocked queues e for the router, which subscribes it on its slot's
// master. l.mu is held, and the hub is not closed.
func (l *links) placeLocked(p placement) {
	e := p.e
	e.conn = nil
	e.placing = true
	e.gen.Add(1) // not ready until confirmed where it goes
	l.unplaced = append(l.unplaced, p)
	if l.routeStop == nil {
		var ctx context.Context
		ctx, l.routeStop = context.WithCancel(context.Background())
		l.wg.Add(1)
		go l.routeLoop(ctx)
	}
	select {
	case l.routeKick <- struct{}{}:
	default:
	}
}

// moveSlotLocked takes every channel of slot off sc and queues it to be
// placed where the slot went (to, when a MOVED reply said so), appending
// their entries to woken. sc is closed if it carries nothing else. l.mu is
// held.
func (l *links) moveSlotLocked(sc *subConn, slot int, to string, woken []*entry) []*entry {
	if sc.dead || l.connClosed {
		return woken
	}
	now := time.Now()
	n := 0
	for name, e := range sc.entries {
		if e.slot != slot {
			continue
		}
		delete(sc.entries, name)
		delete(sc.pending, name) // a confirmation still to come finds e elsewhere
		if sc.track != nil {
			sc.track.unwatch(e) // watched again where it goes
		}
		l.placeLocked(placement{e: e, from: sc.node, to: to, since: now})
		woken = append(woken, e)
		n++
	}
	// An unsubscribe of the slot's channels gets a MOVED reply now, or
	// its confirmation finds no channel: either way it is not counted.
	for ch := range sc.unsubscribing {
		if scripts.KeySlot(ch) == slot {
			delete(sc.unsubscribing, ch)
		}
	}
	if n > 0 {
		l.log.Debug("slot moved: its channels are placed again", "slot", slot, "from", sc.node, "to", to, "channels", n)
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
// from sc's master (to a subscribe, or to a tracking read) on their new
// master; the new subscriptions' confirmations wake their waiters, and
// their keys are watched there.
func (l *links) slotsMoved(sc *subConn, moves ...slotMove) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.byNode {
		return
	}
	for _, m := range moves {
		l.moveSlotLocked(sc, m.slot, m.to, nil)
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

// routeLoop places the queued channels until Close ends ctx.
func (l *links) routeLoop(ctx context.Context) {
	defer l.wg.Done()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	var (
		todo   []placement
		placed []placedOn
	)
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

		reload := false
		for i := range todo {
			reload = reload || todo[i].reload || todo[i].from != ""
			todo[i].reload = false
		}
		if reload {
			l.cc.ReloadState(ctx) // in the background; a reload in progress is followed by one more
		}
		var lookupErr error
		todo, placed, lookupErr = l.locate(ctx, todo, placed)
		todo = l.attach(todo, placed)
		clear(placed)
		placed = placed[:0]

		if lookupErr != nil {
			l.log.Debug("no master found for a channel's slot", "err", lookupErr)
			if l.failed != nil {
				l.failed(lookupErr)
			}
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

// locate finds the master of each channel in todo: those it found (and
// that need not wait for the slot map to show a move) are appended to
// placed, the others kept in todo. lookupErr is the last failed lookup.
func (l *links) locate(ctx context.Context, todo []placement, placed []placedOn) (_ []placement, _ []placedOn, lookupErr error) {
	now := time.Now()
	keep := todo[:0]
	for _, p := range todo {
		node, err := l.master(ctx, p.e.name)
		if err != nil {
			lookupErr = err
			keep = append(keep, p)
			continue
		}
		addr := node.Options().Addr
		if p.waits(addr, now) {
			keep = append(keep, p)
			continue
		}
		if p.from != "" {
			l.log.Debug("moved channel placed", "channel", p.e.name, "node", addr, "waited", now.Sub(p.since))
		}
		placed = append(placed, placedOn{p.e, addr, node})
	}
	clear(todo[len(keep):])
	return keep, placed, lookupErr
}

// attach puts the placed channels on their master's connection (opening
// it on first use), and returns what is left of todo once the channels
// unsubscribed meanwhile are dropped.
func (l *links) attach(todo []placement, placed []placedOn) []placement {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range placed {
		if !p.e.placing || l.connClosed {
			continue // unsubscribed meanwhile
		}
		l.connLocked(p.addr, l.nodeClientLocked(p.addr, p.node)).addLocked(p.e)
	}
	return slices.DeleteFunc(todo, func(p placement) bool { return !p.e.placing || l.connClosed })
}

// placedOn is a channel and the master it goes to.
type placedOn struct {
	e    *entry
	addr string
	node *redis.Client
}

// master returns the client of the master that serves channel's slot, as
// the slot map says. It does I/O only if the map was never loaded.
func (l *links) master(ctx context.Context, channel string) (*redis.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	return l.cc.MasterForKey(ctx, channel)
}
