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
//   - each pub/sub connection through a client of the hub's own has a
//     tracking connection to the same node, with CLIENT TRACKING ON
//     REDIRECT <the pub/sub connection's id>;
//   - an EXISTS of a key there makes Redis send one invalidation on its
//     next change, deletion or expiry;
//   - on an invalidation the hub reads the key again (re-arming the
//     tracking) once the lock's channels have been quiet for trackQuiet,
//     and, if the key is gone, wakes the lock's longest waiter in this
//     client (every reader with it, as a write unlock would): on the
//     first of the key's channels that has waiters (a fair waiter's own
//     channel stays a while after it took the lock and left, and a wake-up
//     there would wake no one). If the key is held by that waiter's own
//     field instead, a release in Redis granted it the lock and its
//     message was lost (an ACL without PUBLISH): the waiter is woken to
//     try, which takes the grant (one HEXISTS more per read).
//
// A key deleted between a waiter's try and the first EXISTS is seen by
// that EXISTS. A quiet lock costs one EXISTS per change (a renewal), and
// one wake-up per key, not per waiter, keeps a fair lock's queue from a
// herd. FLUSHALL's invalidation without keys, which go-redis cannot parse,
// replaces the connection, which wakes every waiter.
//
// On a cluster with sharded pub/sub a key is watched where its channel is,
// and the watch moves with it (moveSlotLocked); a read answered MOVED
// places its slot's channels again. Tracking is off where the hub has no
// client of its own (links.init), and where the server refuses CLIENT ID
// or CLIENT TRACKING.

const (
	invalidateChannel = "__redis__:invalidate" // where Redis sends a RESP2 client's invalidations
	// trackQuiet is how long a lock's channels must go without a message,
	// and invalidations gather, before the hub reads its key again: a
	// lock that keeps changing hands costs no EXISTS (tracking is one-shot).
	trackQuiet    = 20 * time.Millisecond
	trackPingIdle = 500 * time.Millisecond // a tracking connection without I/O this long is pinged
)

// subConnKey, as a dial's ctx value, is the subConn it dials for
// (recordClientID).
type subConnKey struct{}

// ownLocked returns the hub's own client for node (a cluster master's
// address, or "" for the one server), made from of's options on first
// use: it speaks RESP2 (invalidations come as pub/sub messages), and its
// OnConnect records the CLIENT ID of each pub/sub connection. l.mu is held.
func (l *links) ownLocked(node string, of *redis.Client) *redis.Client {
	if c := l.own[node]; c != nil {
		return c
	}
	own := *of.Options()
	own.Protocol = 2
	own.ContextTimeoutEnabled = true // a dropped connection's ctx ends its I/O
	own.PoolSize = 4                 // tracking connections; pub/sub ones come from their own pool
	own.MinIdleConns, own.MaxIdleConns, own.MaxActiveConns = 0, 0, 0
	own.PushNotificationProcessor = nil
	own.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	own.OnConnect = recordClientID(own.OnConnect)
	c := redis.NewClient(&own)
	l.own[node] = c
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
	for k := range t.due {
		es := t.watched[k] // none: no one waits for it here any more
		if slices.ContainsFunc(es, func(e *entry) bool { return now-e.lastMsg.Load() < int64(trackQuiet) }) {
			putOff = true
			continue
		}
		delete(t.due, k)
		if len(es) > 0 {
			keys = append(keys, k)
		}
	}
	return keys, putOff
}

// gone returns the entries watching key, the longest waiting first
// (wakeLongest wakes the first with waiters).
func (t *tracker) gone(key string) []*entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.watched[key])
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
	conn := sc.client.Conn()
	// The tracking connection's I/O ends with sc, but its dial must not
	// record its id as sc's.
	tctx := context.WithValue(sc.ctx, subConnKey{}, nil)
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
	gather := time.NewTimer(time.Hour)
	defer gather.Stop()
	later := time.NewTimer(time.Hour) // keys put off while busy
	defer later.Stop()
	health := time.NewTicker(trackPingIdle)
	defer health.Stop()
	used := time.Now()
	for {
		select {
		case <-sc.track.kick:
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
		keys, putOff := sc.track.dueKeys(nil, time.Now().UnixNano())
		if putOff {
			later.Reset(trackQuiet)
		}
		if len(keys) == 0 {
			continue
		}
		moved, err := readKeys(tctx, sc.track, conn, keys)
		if err != nil {
			return err
		}
		used = time.Now()
		if len(moved) > 0 {
			sc.l.slotsMoved(sc, moved...)
		}
	}
}

// readKeys reads keys on conn and wakes the locks whose key is gone, and
// a longest waiter the key is held by (granted to it in Redis, its
// message lost: a refused PUBLISH). It returns the slots of keys answered
// MOVED, and where they went; a key answered ASK (its slot is migrating)
// is left alone: its watch moves when the migration ends.
func readKeys(tctx context.Context, t *tracker, conn *redis.Conn, keys []string) (moved []slotMove, err error) {
	ctx, cancel := context.WithTimeout(tctx, ioTimeout)
	defer cancel()
	cmds := make([]*redis.IntCmd, len(keys))
	grantees := make([]grantee, len(keys))
	for i, k := range keys {
		grantees[i] = longestGrantee(t.gone(k))
	}
	_, err = conn.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			cmds[i] = p.Exists(ctx, k)
			if g := &grantees[i]; g.w != nil {
				g.held = p.HExists(ctx, k, g.field)
			}
		}
		return nil
	})
	if err != nil && !scripts.IsReply(err) {
		return nil, err
	}
	for i, cmd := range cmds {
		err := cmd.Err()
		if slot, to, ok := movedSlot(err); ok {
			if !slices.ContainsFunc(moved, func(m slotMove) bool { return m.slot == slot }) {
				moved = append(moved, slotMove{slot, to})
			}
			continue
		}
		if _, ok := redis.IsAskError(err); ok {
			continue
		}
		if err != nil {
			return nil, err
		}
		if cmd.Val() == 0 {
			wakeLongest(t.gone(keys[i]))
		} else if g := grantees[i]; g.held != nil && g.held.Val() {
			g.wake()
		}
	}
	return moved, nil
}

// A grantee is the longest waiter for a key that a release may give the
// lock to, and its read of the key's field.
type grantee struct {
	e     *entry
	w     *Waiter
	field string
	held  *redis.BoolCmd
}

// longestGrantee returns the longest waiter of the first of entries (a
// key's, the longest waiting first) still in the table with waiters, if a
// release may give it the lock (it has a field).
func longestGrantee(entries []*entry) grantee {
	for _, e := range entries {
		e.sh.mu.Lock()
		var g grantee
		live := e.waitedOn()
		if live && e.waiters[0].field != "" {
			g = grantee{e: e, w: e.waiters[0], field: e.waiters[0].field}
		}
		e.sh.mu.Unlock()
		if live {
			return g
		}
	}
	return grantee{}
}

// wake signals the grantee, found holding the lock, to try (its try takes
// the grant), if it still waits there as that field and no offer to it
// stands.
func (g grantee) wake() {
	e := g.e
	e.sh.mu.Lock()
	defer e.sh.mu.Unlock()
	if e.sh.entries[e.name] == e && slices.Contains(e.waiters, g.w) && g.w.field == g.field && g.w.offer == OfferNone {
		signal(e, g.w)
	}
}
