package hub

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime/internal/calls"
	"github.com/lockgen/lockgen/runtime/internal/scripts"
)

// The hub's connections. As in go-redis' pubsub.go, the subscribed
// channels (the hub's entries) are the truth and a connection is
// disposable: one that fails, or is found dead, is closed and its channels
// are subscribed again on a fresh one. Each has a writer, which sends what
// is queued for it in order, and a reader: no I/O runs under the hub's locks.
//
// Health: a half-open connection neither delivers nor fails. The monitor
// pings a connection with channels after pingIdle without a message, and
// declares it dead when nothing arrives within pingTimeout of a send
// (connectTimeout before it received anything: the dial and a TLS
// handshake). A dead connection is closed (cancelling a dial in progress),
// its channels move to a new one, and its waiters are woken (fail says
// when). One that fails before it received anything, or on an error reply
// (a refusal that would come again), is replaced after a backoff doubling
// from 20 ms to maxBackoff.
const (
	// pingIdle: ten PINGs a second while someone waits (or a channel
	// lingers); an idle connection without channels is never pinged.
	pingIdle = 100 * time.Millisecond
	// pingTimeout must exceed a round trip and a loaded server's pause; a
	// false alarm costs a reconnect and one extra try per waiter.
	pingTimeout    = 400 * time.Millisecond
	connectTimeout = 2 * time.Second
	healthTick     = 50 * time.Millisecond
	// ioTimeout bounds one call of a writer, so a replaced connection
	// does not keep a goroutine for long.
	ioTimeout = 5 * time.Second
	// maxBackoff: once the server is back, waiters are woken by the new
	// subscription at most this much later.
	maxBackoff  = 250 * time.Millisecond
	receiveWait = time.Second // how often the reader looks whether its connection was dropped
)

// links are a Hub's pub/sub connections: one per server, or per master
// on a cluster with sharded pub/sub (byNode, route.go), their health
// monitor and the hub's own clients (track.go).
type links struct {
	hub     *Hub
	log     *slog.Logger
	slots   *calls.SlotMaps // Config.Slots
	sharded bool
	cc      *redis.ClusterClient  // the caller's client, if a cluster's
	byNode  bool                  // sharded on a cluster: a connection per master (route.go)
	sub     redis.UniversalClient // what the one connection (not byNode) subscribes through
	// stop ends with Close: the health monitor, the router and every
	// connection's goroutines.
	stop   context.Context
	cancel context.CancelFunc

	// mu guards the fields below, every subConn's state and each entry's
	// conn and placing.
	mu sync.Mutex
	// own are the hub's own clients (track.go) by node address (byNode),
	// or at "" for a single server: the connections through them track keys.
	own map[string]*redis.Client
	// conns are the connections by node address (byNode), or the one at "".
	conns map[string]*subConn
	// monitoring: the health monitor runs (from a first connection until
	// none is left); routing: the router runs (from a first placement).
	monitoring, routing bool
	// failures is, by node, the backoff of a connection that failed young,
	// for the next one to the node.
	failures  map[string]failure
	unplaced  []placement // the channels waiting for their node (route.go)
	routeKick chan struct{}
	wg        sync.WaitGroup
}

// init sets l up for h as cfg says (no Client: a hub that never connects).
func (l *links) init(h *Hub, cfg Config) {
	*l = links{
		hub:       h,
		log:       cfg.Log,
		slots:     cfg.Slots,
		sharded:   cfg.Sharded,
		sub:       cfg.Client,
		own:       make(map[string]*redis.Client),
		conns:     make(map[string]*subConn),
		failures:  make(map[string]failure),
		routeKick: make(chan struct{}, 1),
	}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	l.stop, l.cancel = context.WithCancel(context.Background())
	l.cc, _ = cfg.Client.(*redis.ClusterClient)
	l.byNode = l.cc != nil && l.sharded
	// A single server is subscribed through a client of the hub's own; a
	// cluster's masters get theirs (route.go); a cluster with classic
	// pub/sub, or a Sentinel failover client (whose options cannot be
	// copied), is subscribed through itself, without key tracking.
	if r, ok := cfg.Client.(*redis.Client); ok && r.Options().Addr != "FailoverClient" {
		l.sub = l.ownLocked("", r)
	}
}

// subConn is one pub/sub connection.
type subConn struct {
	l    *links
	node string // its key in l.conns: the node's address (byNode), or ""
	ps   *redis.PubSub
	kick chan struct{} // capacity 1: the writer has work
	// ctx ends with the connection: its goroutines and a dial in progress.
	ctx    context.Context
	cancel context.CancelFunc

	clientID atomic.Int64  // CLIENT ID of its connection (0: unknown), see track.go
	track    *tracker      // nil: no key tracking
	client   *redis.Client // the hub's own client it subscribes through, when it tracks

	// Health, written by the reader without l.mu, in Unix nanoseconds.
	heard     atomic.Bool  // something was received on it
	lastHeard atomic.Int64 // when something was last received (or the reader started)
	awaiting  atomic.Int64 // when a reply became due that has not come (0: none)

	// The rest is guarded by l.mu.
	entries map[string]*entry // channels it carries
	ops     []subOp           // sends queued for the writer
	pending map[string]int    // by channel, the subscribes not yet confirmed
	// unsubscribing counts, by channel, the unsubscribes not yet
	// confirmed; any other unsubscribe comes from the server.
	unsubscribing map[string]int
	dead          bool
	prev          failure // its predecessor on the node failed young: its first send waits out prev's backoff
	reading       bool    // the reader runs: the connection is up
}

// subscribeLocked subscribes e: on the one connection, or (byNode) on its
// slot's master's once the router found it. After Close, or without a
// client, it does nothing.
func (l *links) subscribeLocked(e *entry) {
	switch {
	case l.hub.closed.Load() || l.sub == nil:
	case l.byNode:
		l.placeLocked(placement{e: e})
	default:
		l.connLocked("", l.sub).addLocked(e)
	}
}

func (sc *subConn) addLocked(e *entry) {
	e.conn = sc
	e.placing = false
	e.gen.Add(1) // not ready until this subscribe is confirmed
	sc.entries[e.name] = e
	sc.pending[e.name]++
	sc.queueLocked(subOp{opSubscribe, e.name, e.also})
	if sc.track != nil {
		sc.track.watch(e)
	}
}

// unsubscribeLocked drops e's subscription; a sharded connection left with
// no channel is closed.
func (l *links) unsubscribeLocked(e *entry) {
	e.placing = false // if it waits for its node, it is never placed
	sc := e.conn
	if sc == nil || sc.dead || sc.entries[e.name] != e {
		return
	}
	delete(sc.entries, e.name)
	if sc.track != nil {
		sc.track.unwatch(e)
	}
	if l.sharded && len(sc.entries) == 0 {
		l.dropLocked(sc)
		return
	}
	sc.unsubscribing[e.name]++
	if e.also != "" {
		sc.unsubscribing[e.also]++
	}
	sc.queueLocked(subOp{opUnsubscribe, e.name, e.also})
}

// A subOp is a send queued for the writer: a record, not a closure, so
// queueing a subscribe allocates nothing (a fair waiter subscribes and
// unsubscribes a channel of its own per wait).
type subOp struct {
	kind          subOpKind
	channel, also string // also: e.also, in the same command ("": none)
}

type subOpKind uint8

const (
	opSubscribe subOpKind = iota
	opUnsubscribe
	opPing
)

func (sc *subConn) queueLocked(op subOp) {
	sc.ops = append(sc.ops, op)
	select {
	case sc.kick <- struct{}{}:
	default:
	}
}

// A failure is the backoff a connection that failed young left for the
// next one to its node, and when.
type failure struct {
	backoff time.Duration
	at      time.Time
}

// connLocked returns the connection to node, starting one through client
// if there is none; its first subscribe dials, after the backoff of the
// node's last connection if that failed young.
func (l *links) connLocked(node string, client redis.UniversalClient) *subConn {
	if sc := l.conns[node]; sc != nil {
		return sc
	}
	sc := &subConn{
		l:             l,
		node:          node,
		kick:          make(chan struct{}, 1),
		entries:       make(map[string]*entry),
		pending:       make(map[string]int),
		unsubscribing: make(map[string]int),
	}
	sc.prev = l.failures[node]
	delete(l.failures, node)
	// The ctx says which subConn a dial is for (track.go).
	sc.ctx, sc.cancel = context.WithCancel(context.WithValue(l.stop, subConnKey{}, sc))
	if c, ok := client.(*redis.Client); ok && l.own[node] == c {
		sc.client, sc.track = c, newTracker()
	}
	if l.sharded {
		sc.ps = client.SSubscribe(context.Background())
	} else {
		sc.ps = client.Subscribe(context.Background())
	}
	l.conns[node] = sc
	if !l.monitoring {
		l.monitoring = true
		l.wg.Add(1)
		go l.monitorLoop()
	}
	l.wg.Add(1)
	go sc.writeLoop()
	return sc
}

// dropLocked closes sc, without replacing it.
func (l *links) dropLocked(sc *subConn) {
	if sc.dead {
		return
	}
	sc.dead = true
	sc.cancel()
	if l.conns[sc.node] == sc {
		delete(l.conns, sc.node)
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		_ = sc.ps.Close() // may wait for a dial in progress on it
	}()
}

// failLocked drops sc and subscribes its channels again on a new
// connection (byNode: each on its slot's master's, maybe another by now).
// It returns their entries, for a caller that wakes them at once after
// releasing l.mu; the new subscription's confirmation wakes them anyway.
func (l *links) failLocked(sc *subConn, why string, err error) []*entry {
	if sc.dead || l.hub.closed.Load() {
		return nil
	}
	l.dropLocked(sc)
	l.slots.Failed(err) // the node may be dead and its slots served elsewhere
	l.log.Debug("pub/sub connection replaced", "node", sc.node, "why", why, "err", err, "channels", len(sc.entries))
	if len(sc.entries) == 0 {
		return nil
	}
	// No reconnect loop on a persistent fault: the server is down, or
	// refuses what it will refuse again.
	if !sc.heard.Load() || scripts.IsReply(err) {
		backoff := min(max(2*sc.prev.backoff, 20*time.Millisecond), maxBackoff)
		l.failures[sc.node] = failure{backoff, time.Now()}
	} else {
		delete(l.failures, sc.node)
	}
	// A slot that moved (the server dropped the channel, or refused it)
	// is looked up again (in the background) before the channels go out.
	if err == nil || scripts.IsReply(err) {
		l.slots.Reload()
	}
	woken := make([]*entry, 0, len(sc.entries))
	for _, e := range sc.entries {
		if l.byNode {
			l.placeLocked(placement{e: e})
		} else {
			l.connLocked(sc.node, l.sub).addLocked(e)
		}
		woken = append(woken, e)
	}
	return woken
}

// fail replaces sc (failLocked). Unlocks may have been lost: its waiters
// are woken by the new subscription's confirmation, and with wake at once
// too (tracking failed: the server may be fine); after a read or write
// error they do not spend tries on a server that is down.
func (sc *subConn) fail(why string, err error, wake bool) {
	sc.l.mu.Lock()
	woken := sc.l.failLocked(sc, why, err)
	sc.l.mu.Unlock()
	if wake {
		wakeEntries(woken)
	}
}

// writeLoop sends what is queued for sc until sc is dropped.
func (sc *subConn) writeLoop() {
	defer sc.l.wg.Done()
	if wait := time.Until(sc.prev.at.Add(sc.prev.backoff)); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-sc.ctx.Done():
			t.Stop()
			return
		}
	}
	for {
		select {
		case <-sc.kick:
		case <-sc.ctx.Done():
			return
		}
		for op, ok := sc.nextOp(); ok; op, ok = sc.nextOp() {
			if err := sc.send(op); err != nil {
				sc.fail("send failed", err, false)
				return
			}
		}
	}
}

// nextOp takes the next queued send and marks a reply as due.
func (sc *subConn) nextOp() (subOp, bool) {
	sc.l.mu.Lock()
	defer sc.l.mu.Unlock()
	if sc.dead || len(sc.ops) == 0 {
		return subOp{}, false
	}
	op := sc.ops[0]
	sc.ops[0] = subOp{}
	sc.ops = sc.ops[1:]
	sc.awaiting.CompareAndSwap(0, time.Now().UnixNano())
	return op, true
}

// send sends op: an (un)subscribe names e's companion channel in the same
// command, so no script sees one subscribed without the other (a lock's
// grant channel shares its channel's hash tag: one SSUBSCRIBE on a
// cluster names a single slot).
func (sc *subConn) send(op subOp) error {
	ctx, cancel := context.WithTimeout(sc.ctx, ioTimeout)
	defer cancel()
	chans := []string{op.channel}
	if op.also != "" {
		chans = append(chans, op.also)
	}
	var err error
	switch {
	case op.kind == opPing:
		err = sc.ps.Ping(ctx)
	case op.kind == opSubscribe && sc.l.sharded:
		err = sc.ps.SSubscribe(ctx, chans...)
	case op.kind == opSubscribe:
		err = sc.ps.Subscribe(ctx, chans...)
	case sc.l.sharded:
		err = sc.ps.SUnsubscribe(ctx, chans...)
	default:
		err = sc.ps.Unsubscribe(ctx, chans...)
	}
	if err == nil {
		sc.startReader()
	}
	return err
}

// startReader starts the reader after the first send: a receive on a
// subscription with no channel yet would dial a random cluster node, where
// a sharded subscribe is refused (MOVED) and never confirmed.
func (sc *subConn) startReader() {
	l := sc.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if sc.reading || sc.dead {
		return
	}
	sc.reading = true
	sc.lastHeard.Store(time.Now().UnixNano())
	l.wg.Add(1)
	go sc.readLoop()
	if sc.track != nil {
		l.wg.Add(1)
		go sc.trackLoop()
	}
}

func (sc *subConn) readLoop() {
	l := sc.l
	defer l.wg.Done()
	for {
		msg, err := sc.ps.ReceiveTimeout(context.Background(), receiveWait)
		if sc.ctx.Err() != nil {
			return
		}
		if err == nil {
			l.received(sc, msg)
			continue
		}
		var ne net.Error
		switch slot, to, moved := movedSlot(err); {
		case errors.As(err, &ne) && ne.Timeout():
			// The monitor decides whether the silence is death.
		case moved && l.byNode:
			if sc.hear() {
				l.slotsMoved(sc, slotMove{slot, to})
			}
		default:
			sc.fail("receive failed", err, false)
			return
		}
	}
}

// hear records that sc heard from its server now, unless sc is dropped
// (false).
func (sc *subConn) hear() bool {
	if sc.ctx.Err() != nil {
		return false
	}
	sc.heard.Store(true)
	sc.lastHeard.Store(time.Now().UnixNano())
	sc.awaiting.Store(0)
	return true
}

// received handles one message read on sc.
func (l *links) received(sc *subConn, msg any) {
	if !sc.hear() {
		return
	}
	switch m := msg.(type) {
	case *redis.Message:
		if m.Channel != invalidateChannel {
			l.hub.deliver(m.Channel, m.Payload)
		} else if sc.track != nil { // one key in Payload, or several in PayloadSlice
			sc.track.invalidated(m.Payload)
			sc.track.invalidated(m.PayloadSlice...)
		}
	case *redis.Subscription:
		var (
			confirmed *entry
			gen       uint64
			woken     []*entry
		)
		l.mu.Lock()
		if !sc.dead {
			switch m.Kind {
			case "subscribe", "ssubscribe":
				confirmed, gen = sc.confirmedLocked(m.Channel)
			case "unsubscribe", "sunsubscribe":
				woken = l.unsubscribedLocked(sc, m.Channel)
			}
		}
		l.mu.Unlock()
		if confirmed != nil {
			l.hub.confirmed(confirmed, gen)
		}
		wakeEntries(woken)
	}
}

// confirmedLocked counts a confirmed subscribe of channel off sc's
// pending ones. At the last, it returns the entry sc carries on channel and
// its generation, the one that subscribe was sent for. An earlier
// confirmation makes nothing ready (Hub.confirmed would refuse it): each
// subscribe after it was sent for its entry again, a generation later, or
// for a new entry of the channel, once its own had left the channel table.
func (sc *subConn) confirmedLocked(channel string) (*entry, uint64) {
	switch n := sc.pending[channel]; {
	case n == 0:
		return nil, 0
	case n > 1:
		sc.pending[channel] = n - 1
		return nil, 0
	}
	delete(sc.pending, channel)
	if e := sc.entries[channel]; e != nil && e.conn == sc {
		return e, e.gen.Load()
	}
	return nil, 0
}

// unsubscribedLocked handles an unsubscribe notice for channel on sc. One
// the hub did not ask for means its slot moved: byNode, that slot's
// channels move to its new master (route.go); otherwise sc's move to a
// new connection, which go-redis dials to the slot's owner. It returns
// the entries to wake.
func (l *links) unsubscribedLocked(sc *subConn, channel string) []*entry {
	if n := sc.unsubscribing[channel]; n > 1 {
		sc.unsubscribing[channel] = n - 1
		return nil
	} else if n == 1 {
		delete(sc.unsubscribing, channel)
		return nil
	}
	if !l.byNode {
		return l.failLocked(sc, "unsubscribed by the server", nil)
	}
	if sc.entries[channel] != nil { // else its slot moved on already
		return l.moveSlotLocked(sc, scripts.KeySlot(channel), "")
	}
	return nil
}

// monitorLoop checks the health of every connection each healthTick.
func (l *links) monitorLoop() {
	defer l.wg.Done()
	t := time.NewTicker(healthTick)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-l.stop.Done():
			return
		}
		now := time.Now().UnixNano()
		var woken []*entry
		l.mu.Lock()
		if len(l.conns) == 0 {
			l.monitoring = false // the next connection starts another
			l.mu.Unlock()
			return
		}
		// A connection failLocked adds meanwhile has sent nothing: the
		// range may visit it or not, to the same effect.
		for _, sc := range l.conns {
			awaiting := sc.awaiting.Load()
			limit := pingTimeout
			if !sc.heard.Load() {
				limit = connectTimeout
			}
			switch {
			case awaiting != 0 && time.Duration(now-awaiting) > limit:
				woken = append(woken, l.failLocked(sc, "no reply within "+limit.String(), nil)...)
			case awaiting == 0 && sc.reading && len(sc.entries) > 0 && time.Duration(now-sc.lastHeard.Load()) > pingIdle:
				// Due from now, not from when the writer gets to it: a
				// writer stuck in I/O must not hide a dead connection.
				if sc.awaiting.CompareAndSwap(0, now) {
					sc.queueLocked(subOp{kind: opPing})
				}
			}
		}
		l.mu.Unlock()
		wakeEntries(woken)
	}
}

// close drops every connection and stops the goroutines of l.
func (l *links) close() {
	l.mu.Lock()
	for _, sc := range l.conns {
		l.dropLocked(sc)
	}
	l.cancel()
	own := l.own
	l.own = nil
	l.mu.Unlock()
	// Closing the hub's own clients ends a read stuck on one of their
	// connections, which a cancelled ctx does not.
	for _, c := range own {
		_ = c.Close()
	}
	l.wg.Wait()
}
