package hub

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/lockgen/lockgen/runtime/internal/scripts"
)

// Key tracking: a lock can become free without an unlock message (a key
// deleted by an operator or FLUSHALL, a crashed holder's key expired), and
// its waiters would sleep until the holder's TTL their last try saw. So
// the hub watches the key of every lock it has waiters for with Redis'
// client-side-caching invalidations (CLIENT TRACKING, Redis >= 6):
//
//   - each pub/sub connection has a tracking connection to the same node,
//     with CLIENT TRACKING ON REDIRECT <the pub/sub connection's id>;
//   - an EXISTS of a key there makes Redis send one invalidation on its
//     next change, deletion or expiry;
//   - on an invalidation the hub reads the key again (re-arming the
//     tracking) once the lock's channels have been quiet for trackQuiet,
//     and, if the key is gone, wakes the lock's longest waiter in this
//     client (every reader with it, as a write unlock would).
//
// A key deleted between a waiter's try and the first EXISTS is seen by
// that EXISTS. A quiet lock costs one EXISTS per change (a renewal), and
// one wake-up per key, not per waiter, keeps a fair lock's queue from a
// herd. FLUSHALL's invalidation without keys, which go-redis cannot parse,
// replaces the connection, which wakes every waiter.
//
// On a cluster with sharded pub/sub each master's pub/sub connection
// (route.go) has one tracking connection to that master: a key is watched
// where its channel is, and the watch moves with it (moveSlotLocked); a
// read answered MOVED places its slot's channels again.
//
// Tracking is off for Sentinel failover clients (their options cannot be
// copied), where the server refuses CLIENT ID or CLIENT TRACKING, and on a
// cluster with classic pub/sub.

// invalidateChannel is where Redis sends invalidations to a RESP2 client.
const invalidateChannel = "__redis__:invalidate"

// trackQuiet is how long a lock's channels must go without a message, and
// invalidations gather, before the hub reads its key again: a lock that
// keeps changing hands costs no EXISTS (tracking is one-shot).
const trackQuiet = 20 * time.Millisecond

// trackPingIdle is how long a tracking connection may go without I/O
// before it is pinged.
const trackPingIdle = 500 * time.Millisecond

// subConnKey, as a dial's ctx value, is the subConn it dials for
// (recordClientID).
type subConnKey struct{}

// subClient returns the client the hub subscribes with and whether key
// tracking works with it: the hub's own for a single server; rdb itself
// for a cluster (whose masters get their own: nodeClientLocked) or a
// Sentinel failover client.
func subClient(rdb redis.UniversalClient) (sub redis.UniversalClient, closeFn func() error, track bool) {
	if r, ok := rdb.(*redis.Client); ok && r.Options().Addr != "FailoverClient" {
		c := ownClient(r.Options())
		return c, c.Close, true
	}
	return rdb, nil, false
}

// ownClient returns a client of the hub's own for the server of o,
// speaking RESP2 (invalidations come as pub/sub messages), whose OnConnect
// records the CLIENT ID of each pub/sub connection.
func ownClient(o *redis.Options) *redis.Client {
	own := *o
	own.Protocol = 2
	own.ContextTimeoutEnabled = true // a dropped connection's ctx ends its I/O
	own.PoolSize = 4                 // tracking connections; pub/sub ones come from their own pool
	own.MinIdleConns, own.MaxIdleConns, own.MaxActiveConns = 0, 0, 0
	own.PushNotificationProcessor = nil
	own.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	own.OnConnect = recordClientID(o.OnConnect)
	return redis.NewClient(&own)
}

// nodeClientLocked returns the hub's own client for the cluster master at
// addr (node: the cluster's client of it), made on first use. l.mu is held.
func (l *links) nodeClientLocked(addr string, node *redis.Client) *redis.Client {
	c := l.nodes[addr]
	if c == nil {
		c = ownClient(node.Options())
		l.nodes[addr] = c
	}
	return c
}

// recordClientID wraps the caller's OnConnect: a connection dialled for a
// subConn (its ctx says which) records its CLIENT ID there (a refusal
// turns tracking off for it).
func recordClientID(user func(context.Context, *redis.Conn) error) func(context.Context, *redis.Conn) error {
	return func(ctx context.Context, cn *redis.Conn) error {
		if user != nil {
			if err := user(ctx, cn); err != nil {
				return err
			}
		}
		if sc, ok := ctx.Value(subConnKey{}).(*subConn); ok {
			if id, err := cn.Do(ctx, "client", "id").Int64(); err == nil {
				sc.clientID.Store(id)
			}
		}
		return nil
	}
}

// tracker watches the keys of the locks waited for on one subConn.
type tracker struct {
	kick chan struct{} // capacity 1: keys are due

	mu      sync.Mutex
	watched map[string][]*entry // by key: the entries on sc waiting for it
	due     map[string]struct{} // keys to read (again)
}

func newTracker() *tracker {
	return &tracker{
		kick:    make(chan struct{}, 1),
		watched: make(map[string][]*entry),
		due:     make(map[string]struct{}),
	}
}

// watch starts watching e's key (l.mu is held).
func (t *tracker) watch(e *entry) {
	if e.key == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	es := t.watched[e.key]
	t.watched[e.key] = append(es, e)
	if len(es) == 0 {
		t.markLocked(e.key)
	}
}

// unwatch stops watching e's key for e (l.mu is held). The server may
// still send one invalidation for it, which finds no entry.
func (t *tracker) unwatch(e *entry) {
	if e.key == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	es := slices.DeleteFunc(t.watched[e.key], func(x *entry) bool { return x == e })
	if len(es) == 0 {
		delete(t.watched, e.key)
		return
	}
	t.watched[e.key] = es
}

// invalidated handles an invalidation of keys ("" is never watched).
func (t *tracker) invalidated(keys ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, k := range keys {
		if len(t.watched[k]) > 0 {
			t.markLocked(k)
		}
	}
}

func (t *tracker) markLocked(key string) {
	t.due[key] = struct{}{}
	select {
	case t.kick <- struct{}{}:
	default:
	}
}

// dueKeys appends the keys due to keys, but those with a message on a
// channel within trackQuiet of now (Unix ns): they stay due (putOff).
func (t *tracker) dueKeys(keys []string, now int64) (_ []string, putOff bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
next:
	for k := range t.due {
		if len(t.watched[k]) == 0 {
			// No one waits for it here any more.
			delete(t.due, k)
			continue
		}
		for _, e := range t.watched[k] {
			if now-e.lastMsg.Load() < int64(trackQuiet) {
				putOff = true
				continue next
			}
		}
		delete(t.due, k)
		keys = append(keys, k)
	}
	return keys, putOff
}

// gone returns the entry of key's longest waiter: the first watched.
func (t *tracker) gone(key string, into []*entry) []*entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	if es := t.watched[key]; len(es) > 0 {
		into = append(into, es[0])
	}
	return into
}

// trackLoop turns tracking on for sc and reads the keys due until sc is
// dropped; it runs once sc's connection is up (its id is known). The
// redirect target needs no SUBSCRIBE to __redis__:invalidate (an ACL that
// limits channels would refuse it): Redis sends a RESP2 redirect's
// invalidations to any connection in pub/sub mode.
//
// Redis tells no one when a tracking client goes away, and its
// invalidations just stop: so the connection is pinged after
// trackPingIdle without I/O, and a failed read or ping replaces sc,
// waking every waiter.
func (sc *subConn) trackLoop() {
	l := sc.l
	defer l.wg.Done()
	id := sc.clientID.Load()
	if id == 0 {
		l.log.Debug("key tracking off: CLIENT ID was refused or not read", "node", sc.node)
		return
	}
	conn := sc.client.Conn() // sc.track is set only with sc.client
	// The tracking connection's I/O ends with sc, but its ctx does not say
	// it is for sc: its dial must not record its id as sc's.
	tctx, stop := context.WithCancel(context.Background())
	defer stop()
	defer context.AfterFunc(sc.ctx, stop)()
	// Back to the pool, tracking still on: the next tracker redirects it.
	// One closed with the hub is not handed back (go-redis would log it).
	defer func() {
		if !l.hub.closed.Load() {
			_ = conn.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(tctx, connectTimeout)
	err := conn.Do(ctx, "client", "tracking", "on", "redirect", strconv.FormatInt(id, 10)).Err()
	cancel()
	if scripts.IsReply(err) {
		l.log.Debug("key tracking off: CLIENT TRACKING refused", "node", sc.node, "err", err)
		return
	}
	if err == nil {
		err = sc.trackKeys(tctx, conn)
	}
	if err != nil {
		sc.fail("key tracking connection failed", err, true)
	}
}

// trackKeys reads the keys due on conn, whose tracking is on, until sc is
// dropped (nil) or conn fails; it pings conn when it goes trackPingIdle
// without I/O.
func (sc *subConn) trackKeys(tctx context.Context, conn *redis.Conn) error {
	t := sc.track
	var r keyReader
	gather := time.NewTimer(time.Hour)
	defer gather.Stop()
	later := time.NewTimer(time.Hour) // keys put off while busy
	defer later.Stop()
	health := time.NewTicker(trackPingIdle)
	defer health.Stop()
	used := time.Now()
	for {
		select {
		case <-t.kick:
		case <-later.C:
		case <-health.C:
			if time.Since(used) < trackPingIdle {
				continue
			}
			ctx, cancel := context.WithTimeout(tctx, pingTimeout)
			err := conn.Ping(ctx).Err()
			cancel()
			if err != nil {
				return err
			}
			used = time.Now()
			continue
		case <-sc.ctx.Done():
			return nil
		}
		gather.Reset(trackQuiet)
		select {
		case <-gather.C:
		case <-sc.ctx.Done():
			return nil
		}
		read, putOff, err := r.read(tctx, t, conn)
		if putOff {
			later.Reset(trackQuiet)
		}
		if err != nil {
			return err
		}
		if len(r.moved) > 0 {
			sc.l.slotsMoved(sc, r.moved...)
		}
		if read {
			used = time.Now()
		}
	}
}

// keyReader reads the keys due of a tracker, reusing its slices.
type keyReader struct {
	keys  []string
	cmds  []*redis.IntCmd
	woken []*entry
	moved []slotMove // the slots of keys answered MOVED, and where to
}

// read reads the keys due on conn, but those whose locks are busy (put
// off), and wakes the locks whose key is gone; it reports whether it sent
// anything. A key answered MOVED goes to r.moved; one answered ASK (its
// slot is migrating) is left alone: its watch moves when the migration
// ends.
func (r *keyReader) read(tctx context.Context, t *tracker, conn *redis.Conn) (read, putOff bool, err error) {
	r.moved = r.moved[:0]
	r.keys, putOff = t.dueKeys(r.keys[:0], time.Now().UnixNano())
	if len(r.keys) == 0 {
		return false, putOff, nil
	}
	ctx, cancel := context.WithTimeout(tctx, ioTimeout)
	r.cmds = r.cmds[:0]
	_, err = conn.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range r.keys {
			r.cmds = append(r.cmds, p.Exists(ctx, k))
		}
		return nil
	})
	cancel()
	if err != nil && !scripts.IsReply(err) {
		return true, putOff, err
	}
	r.woken = r.woken[:0]
	for i, cmd := range r.cmds {
		err := cmd.Err()
		if slot, to, ok := movedSlot(err); ok {
			if !slices.ContainsFunc(r.moved, func(m slotMove) bool { return m.slot == slot }) {
				r.moved = append(r.moved, slotMove{slot, to})
			}
			continue
		}
		if _, ok := redis.IsAskError(err); ok {
			continue
		}
		if err != nil {
			clear(r.cmds)
			return true, putOff, err
		}
		if cmd.Val() == 0 {
			r.woken = t.gone(r.keys[i], r.woken)
		}
	}
	wakeEntries(r.woken, true)
	clear(r.cmds)
	return true, putOff, nil
}
