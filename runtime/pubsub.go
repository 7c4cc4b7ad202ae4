package runtime

import (
	"hash/maphash"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// The hub is where waiters sleep. Waiters join a channel (ref-counted: the
// first joiner subscribes) and wait on their own signal; messages become
// signals in memory, by the channel's wake mode:
//
//   - locks (wakeLock): "0" (unlock) wakes one waiter, the longest waiting,
//     so an unlock never starts a thundering herd; "1" (write unlock)
//     wakes every waiting reader and one other waiter;
//   - semaphores (wakeCount): the payload is the number of free permits,
//     and wakes that many waiters;
//   - latches (wakeZero): "0" (the count reached zero) wakes every waiter,
//     any other payload none;
//   - a subscription confirmation wakes every waiter of the channel: on the
//     first subscription it tells them to try again now that no message
//     can be missed; on a replacement connection it makes up for messages
//     published while the old one was dead;
//   - a connection found dead (see hub_conn.go) wakes every waiter of its
//     channels at once, for the same reason.
//
// A waiter that leaves with a wake-up it has not used up (the signal is
// pending, or it was woken and has not finished the try that followed)
// passes it to the next waiter when it gave up, and drops it when it
// acquired, so no wake-up is lost and none is wasted.
//
// This file is the memory side: the channel table and the waiters, in
// hubShards shards by channel, each under its own mutex, so waiters on
// unrelated locks never contend; no I/O runs under them. The connections,
// their (un)subscribe I/O and their health live in hub_conn.go under h.mu.
// Lock order: a shard's mutex, then h.mu; code holding h.mu never takes a
// shard's mutex (it returns what is to be woken, and the caller wakes it
// after unlocking).
//
// In-process FIFO: a newcomer on a channel where this client has waiters
// lets a hand-off go first, so a goroutine that just unlocked and locks
// again does not take the lock from the waiter its unlock is waking. If a
// woken waiter is still trying (a hand-off in flight), the newcomer's
// first try waits until that try is over (at most hubHandoffWait); if
// none is, it waits hubUnlockGrace for an unlock message that may be on
// its way (the releaser's reply and the message to the hub leave Redis
// together, and the releaser is often first), and longer only if that
// message starts a hand-off. It is never a sleep on what someone else saw
// of the lock: every waiter tries before it sleeps on a TTL, and sleeps
// no longer than the holder's TTL its own latest try returned (see
// await); a lock that became free without a message costs a newcomer at
// most hubUnlockGrace.
type hub struct {
	c      *Client
	seed   maphash.Seed
	shards [hubShards]hubShard
	closed atomic.Bool

	nEntries atomic.Int32 // number of channel entries, read without a lock by the uncontended path
	// aliases maps an entry's companion channel (channelEntry.also) to
	// the entry, for the grants published there (grant.go). aliasMu is a
	// leaf: no other lock is taken while it is held.
	aliasMu sync.RWMutex
	aliases map[string]*channelEntry
	waiters sync.Pool // of *waiter, reset

	// sub is the client the hub subscribes with (hub_track.go), closeSub
	// closes it if it is the hub's own; track says whether key tracking
	// works with it.
	sub      redis.UniversalClient
	closeSub func() error
	track    bool

	// mu guards the connections (hub_conn.go): conns, every subConn's
	// state, and each entry's conn.
	mu         sync.Mutex
	conns      map[int]*subConn // by slot (sharded), or the one at 0 (classic)
	connClosed bool
	monitor    chan struct{} // closed by close: ends the health monitor (nil until the first connection)
	wg         sync.WaitGroup
}

// hubShards is the number of channel-table shards: enough that 2 cores'
// worth of goroutines on distinct locks rarely meet on one.
const hubShards = 64

type hubShard struct {
	mu      sync.Mutex
	entries map[string]*channelEntry
	_       [40]byte // keeps neighbouring shards' mutexes off one cache line
}

// wakeMode says what a message on a channel wakes.
type wakeMode uint8

const (
	wakeLock  wakeMode = iota // "0": one waiter; "1": every reader and one other
	wakeCount                 // the payload counts free permits: that many waiters
	wakeZero                  // "0": every waiter; anything else: none
)

type channelEntry struct {
	name string
	key  string // the lock's key, watched while waited for (hub_track.go); "": none
	sh   *hubShard
	mode wakeMode

	// Guarded by sh.mu.
	waiters []*waiter
	// readyGen is the subscription generation the server confirmed; the
	// entry is ready while it is the current one (gen).
	readyGen uint64
	linger   *time.Timer // pending unsubscribe once no one waits
	// inflight counts the waiters that were woken and have not finished
	// the try that followed: a hand-off in flight (see hub).
	inflight int
	// handOffs counts the local hand-offs since the last unlock message
	// (handoff.go).
	handOffs int
	// also is the client's own grant channel for the lock, subscribed
	// with the lock's channel in one command ("": none; grant.go).
	also string
	// remote: other processes wait on the lock too (a grant came from
	// one, or a release saw their subscriptions): a newcomer tries
	// before it sleeps, so it is queued for grants (grant.go).
	remote bool

	// gen counts the subscribes sent for the entry (a new connection sends
	// another); written under h.mu.
	gen atomic.Uint64
	// conn is the connection it is (being) subscribed on; guarded by h.mu.
	conn *subConn
	// lastMsg is when a message last came on the channel (Unix ns): key
	// tracking leaves a lock alone while its messages flow (hub_track.go).
	lastMsg atomic.Int64
}

// ready reports whether the entry's current subscription is confirmed.
// e.sh.mu is held.
func (e *channelEntry) ready() bool {
	return e.readyGen != 0 && e.readyGen == e.gen.Load()
}

// A waiter is one goroutine waiting for a lock.
type waiter struct {
	C      chan struct{} // receives a signal when the lock may be free
	e      *channelEntry
	shared bool // a reader: woken with every other reader
	// woken: signalled by the hub and not yet done with the try that
	// followed (counted in e.inflight).
	woken bool
	// deferred: a newcomer letting a hand-off in flight finish before its
	// first try; signalled when e.inflight drops to 0.
	deferred bool
	// untried: it sleeps without a try of its own (see hub.undefer), so
	// it knows no holder's TTL and counts on the waiters ahead of it.
	untried bool

	// Local hand-off (handoff.go). grantField and grantPx are the owner
	// token and lease a release hands the lock over with ("": the waiter
	// cannot be handed it); set before the waiter first parks.
	grantField  string
	grantPx     any
	parked      bool       // sleeping: a release may offer it the lock
	offer       offerState // where an offer to it stands
	offerMarker string     // the offer's request marker
	offerSent   time.Time  // when the offer's script was sent
	// queued: a try queued it in Redis for grants (grant.go).
	queued bool
}

const (
	// subscriptionLinger keeps a channel subscribed a little after its last
	// waiter left: under steady contention waiters come and go all the
	// time, and re-subscribing for each would double the traffic.
	subscriptionLinger = 250 * time.Millisecond
	// hubHandoffWait bounds how long a newcomer lets a hand-off in flight
	// (a woken waiter's try, one round trip) finish before its own try.
	hubHandoffWait = 50 * time.Millisecond
	// hubUnlockGrace is how long a newcomer waits for an unlock message
	// that may be in transit before its first try, when this client has
	// waiters on the lock but none is woken: a message takes well under a
	// millisecond from Redis to the hub on a healthy link.
	hubUnlockGrace = 2 * time.Millisecond
)

func newHub(c *Client) *hub {
	h := &hub{
		c:       c,
		seed:    maphash.MakeSeed(),
		conns:   make(map[int]*subConn),
		aliases: make(map[string]*channelEntry),
	}
	for i := range h.shards {
		h.shards[i].entries = make(map[string]*channelEntry)
	}
	if c.rdb != nil {
		h.sub, h.closeSub, h.track = hubClient(c.rdb)
	}
	h.waiters.New = func() any { return &waiter{C: make(chan struct{}, 1)} }
	return h
}

func (h *hub) shard(channel string) *hubShard {
	return &h.shards[maphash.String(h.seed, channel)%hubShards]
}

// active reports whether any channel is subscribed or being subscribed:
// when none is, no waiter can attach before its first try, and the
// uncontended path skips the hub.
func (h *hub) active() bool { return h.nEntries.Load() > 0 }

// newWaiter takes a reset waiter from the pool; release gives it back.
func (h *hub) newWaiter(shared bool) *waiter {
	w := h.waiters.Get().(*waiter)
	w.shared = shared
	return w
}

// release returns w, which no entry refers to any more, to the pool.
func (h *hub) release(w *waiter) {
	select {
	case <-w.C:
	default:
	}
	*w = waiter{C: w.C}
	h.waiters.Put(w)
}

// attach registers a waiter on channel before its first try, if the
// channel's subscription is confirmed: a wake-up published during that try
// then reaches it, so it need not try a second time after joining. With
// fifo, a newcomer that finds a hand-off in flight is deferred: it should
// wait on w.C before trying (see hub and await). w is nil when the
// channel is not subscribed yet (the caller tries, then joins).
func (h *hub) attach(channel string, shared, fifo bool) (w *waiter, deferred bool) {
	sh := h.shard(channel)
	sh.mu.Lock()
	e := sh.entries[channel]
	if h.closed.Load() || e == nil || !e.ready() {
		sh.mu.Unlock()
		return nil, false
	}
	w = h.newWaiter(shared)
	others := len(e.waiters)
	addLocked(e, w)
	// Where other processes wait too, the order is the queue in Redis
	// (grant.go): a newcomer joins it with its try.
	deferred = fifo && !e.remote && (e.inflight > 0 || others > 0)
	w.deferred = deferred
	sh.mu.Unlock()
	return w, deferred
}

// undefer ends w's deferral: it takes its place in line at once, without
// a try of its own (untried) until its first wake-up.
func (h *hub) undefer(w *waiter) {
	sh := w.e.sh
	sh.mu.Lock()
	w.deferred = false
	w.untried = true
	sh.mu.Unlock()
}

// handoffInFlight reports whether w is still deferred behind a hand-off in
// flight (its grace for an unlock message in transit is over).
func (h *hub) handoffInFlight(w *waiter) bool {
	sh := w.e.sh
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return w.deferred && w.e.inflight > 0
}

// join registers a waiter on channel, subscribing if nobody else waits on
// it (the subscribe itself runs on the connection's goroutine, never
// here). mode is the channel's wake mode, key the lock's key (watched:
// see hub_track.go; "" for none), also the companion channel a new entry
// subscribes with ("" for none: see grant.go). ready reports whether the
// subscription is already confirmed: if so, a wake-up published since the
// caller's last try may have gone to nobody, and the caller tries again at
// once; otherwise the confirmation wakes it.
func (h *hub) join(channel, key string, mode wakeMode, shared bool, also string) (w *waiter, ready bool, err error) {
	sh := h.shard(channel)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if h.closed.Load() {
		return nil, false, ErrClosed
	}
	e := sh.entries[channel]
	if e == nil {
		e = &channelEntry{name: channel, key: key, sh: sh, mode: mode, also: also}
		sh.entries[channel] = e
		h.nEntries.Add(1)
		if also != "" {
			h.aliasMu.Lock()
			h.aliases[also] = e
			h.aliasMu.Unlock()
		}
		h.mu.Lock()
		h.subscribeLocked(e)
		h.mu.Unlock()
	}
	w = h.newWaiter(shared)
	addLocked(e, w)
	return w, e.ready(), nil
}

// subscribed reports whether channel's subscription is confirmed: a
// message published on it from now on reaches this hub.
func (h *hub) subscribed(channel string) bool {
	sh := h.shard(channel)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.entries[channel]
	return e != nil && e.ready()
}

// setGrantee records who w takes a lock handed to it as (handoff.go):
// under the shard's mutex, since releases and grant messages read it.
func (h *hub) setGrantee(w *waiter, grantee func() (string, any)) {
	field, px := grantee()
	sh := w.e.sh
	sh.mu.Lock()
	w.grantField, w.grantPx = field, px
	sh.mu.Unlock()
}

// addLocked adds w to e's waiters. e.sh.mu is held.
func addLocked(e *channelEntry, w *waiter) {
	if e.linger != nil {
		e.linger.Stop()
	}
	w.e = e
	e.waiters = append(e.waiters, w)
}

// tried tells the hub that w finished a try. A wake-up it used is spent,
// unless handOn: then w was woken but another waiter goes first (a reader
// behind a waiting writer), and the wake-up goes to the next waiter. A
// signal still pending in w.C came after the try started: w will use it
// on its next wait.
func (h *hub) tried(w *waiter, handOn bool) {
	e := w.e
	e.sh.mu.Lock()
	defer e.sh.mu.Unlock()
	w.deferred = false
	w.untried = false
	if !w.woken || len(w.C) > 0 {
		return
	}
	spentLocked(w)
	if handOn {
		wakeOne(e, w)
	}
}

// spentLocked ends w's hand-off and lets deferred newcomers try once no
// hand-off is in flight. w.e.sh.mu is held.
func spentLocked(w *waiter) {
	e := w.e
	w.woken = false
	e.inflight--
	if e.inflight > 0 {
		return
	}
	for _, x := range e.waiters {
		if x.deferred {
			x.deferred = false
			select {
			case x.C <- struct{}{}:
			default:
			}
		}
	}
}

// leave unregisters w and takes it back: the caller must not use it
// again. acquired says whether the waiter got what it waited for; if it
// did not and has a wake-up it did not use up, the wake-up goes to the
// next waiter.
func (h *hub) leave(w *waiter, acquired bool) {
	e := w.e
	sh := e.sh
	sh.mu.Lock()
	for i, x := range e.waiters {
		if x == w {
			copy(e.waiters[i:], e.waiters[i+1:])
			e.waiters[len(e.waiters)-1] = nil
			e.waiters = e.waiters[:len(e.waiters)-1]
			break
		}
	}
	unused := false
	select {
	case <-w.C:
		unused = true
	default:
	}
	if w.woken {
		unused = true
		spentLocked(w)
	}
	if unused && !acquired {
		wakeOne(e, nil)
	}
	if !acquired && !w.untried {
		// A waiter that never tried slept on this one's TTL: with it
		// gone, a lock freed without a message (a lease run out, tracking
		// off) would wake no one before the untried one's bound.
		wakeUntried(e)
	}
	if len(e.waiters) == 0 && sh.entries[e.name] == e && !h.closed.Load() {
		if e.linger == nil {
			e.linger = time.AfterFunc(subscriptionLinger, func() { h.expire(e) })
		} else {
			e.linger.Reset(subscriptionLinger)
		}
	}
	sh.mu.Unlock()
	h.release(w)
}

// expire unsubscribes e if still nobody waits on it.
func (h *hub) expire(e *channelEntry) {
	sh := e.sh
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if h.closed.Load() || sh.entries[e.name] != e || len(e.waiters) > 0 {
		return
	}
	delete(sh.entries, e.name)
	h.nEntries.Add(-1)
	if e.also != "" {
		h.aliasMu.Lock()
		if h.aliases[e.also] == e {
			delete(h.aliases, e.also)
		}
		h.aliasMu.Unlock()
	}
	// Still under sh.mu: a join of the same channel waits, so its
	// subscribe is queued after this unsubscribe.
	h.mu.Lock()
	h.unsubscribeLocked(e)
	h.mu.Unlock()
}

// deliver handles a message published on channel.
func (h *hub) deliver(channel, payload string) {
	sh := h.shard(channel)
	sh.mu.Lock()
	e := sh.entries[channel]
	if e == nil {
		sh.mu.Unlock()
		h.deliverGrant(channel, payload) // a companion channel's, if any
		return
	}
	defer sh.mu.Unlock()
	if h.track && e.key != "" {
		e.lastMsg.Store(time.Now().UnixNano())
	}
	switch e.mode {
	case wakeCount:
		n, err := strconv.Atoi(payload)
		if err != nil {
			n = 1
		}
		wakeN(e, n)
	case wakeZero:
		if payload == unlockMessage {
			wakeAll(e)
		}
	default:
		e.handOffs = 0
		if payload == readUnlockMessage {
			wakeReaders(e)
			return
		}
		if nonce, ok := strings.CutPrefix(payload, grantPrefix); ok && grantFirst(e, nonce) {
			return
		}
		wakeOne(e, nil)
	}
}

// confirmed marks e's subscription of generation gen confirmed by the
// server and wakes its waiters, unless e was dropped or subscribed again
// meanwhile. h.mu is not held.
func (h *hub) confirmed(e *channelEntry, gen uint64) {
	sh := e.sh
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.entries[e.name] != e || e.gen.Load() != gen {
		return
	}
	e.readyGen = gen
	wakeAll(e)
}

// wakeEntries wakes every waiter of entries (their connection was found
// dead: messages may have been lost). h.mu is not held.
func (h *hub) wakeEntries(entries []*channelEntry) {
	for _, e := range entries {
		e.sh.mu.Lock()
		wakeAll(e)
		e.sh.mu.Unlock()
	}
}

// signal sends w a wake-up unless one is pending; it reports whether it did.
func signal(e *channelEntry, w *waiter) bool {
	select {
	case w.C <- struct{}{}:
	default:
		return false
	}
	w.deferred = false
	if !w.woken {
		w.woken = true
		e.inflight++
	}
	return true
}

// wakeReaders signals every reader and the longest-waiting other waiter:
// the readers can all go together; of the writers only one can.
func wakeReaders(e *channelEntry) {
	writer := false
	for _, w := range e.waiters {
		if !w.shared {
			if writer {
				continue
			}
			writer = true
		}
		signal(e, w)
	}
}

// wakeOne signals the longest-waiting waiter (other than skip) that has no
// signal pending, an exclusive one (a writer) before a reader: a read
// unlock that frees the lock matters to a writer; readers were not
// blocked by readers.
func wakeOne(e *channelEntry, skip *waiter) {
	for _, exclusive := range []bool{true, false} {
		for _, w := range e.waiters {
			if w == skip || w.shared == exclusive {
				continue
			}
			if signal(e, w) {
				return
			}
		}
	}
}

// grantFirst tells the longest waiter that can take grants that a release
// gave it the lock for the try with nonce (a fair waiter's own channel:
// fair.go) and wakes it; it reports false when no waiter can take one
// (then it is woken to try: its acquire counts the grant as its own,
// count.lua).
func grantFirst(e *channelEntry, nonce string) bool {
	for _, w := range e.waiters {
		if w.grantField != "" && w.offer == offerNone {
			w.offer, w.offerMarker = offerGranted, nonce
			signal(e, w) // if one is pending already, it is this one
			return true
		}
	}
	return false
}

// wakeN signals the n longest-waiting waiters that have no signal pending.
func wakeN(e *channelEntry, n int) {
	for _, w := range e.waiters {
		if n <= 0 {
			return
		}
		if signal(e, w) {
			n--
		}
	}
}

// wakeUntried signals the longest-waiting waiter that has not tried yet
// (see hub.undefer), so it tries and learns the holder's TTL.
func wakeUntried(e *channelEntry) {
	for _, w := range e.waiters {
		if w.untried {
			signal(e, w)
			return
		}
	}
}

func wakeAll(e *channelEntry) {
	for _, w := range e.waiters {
		signal(e, w)
	}
}
