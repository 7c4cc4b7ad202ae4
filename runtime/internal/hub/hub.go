package hub

import (
	"hash/maphash"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime/internal/calls"
)

// Messages on the channels waited on (see Mode).
const (
	UnlockMessage     = "0" // wakes one waiter (a latch: every waiter)
	ReadUnlockMessage = "1" // wakes every waiting reader and one other waiter
	// GrantPrefix starts a message that tells a waiter a release gave it
	// the lock: "2:<nonce of its try>" on a fair waiter's own channel
	// (lua/fair_next.lua), "2:<owner> <nonce>" on a grant channel
	// (lua/grant_next.lua); lockgen's own, never Redisson's.
	GrantPrefix = "2:"
)

// A channel's wake mode says what a message on it wakes:
//
//   - WakeLock: "0" wakes the longest waiter, so an unlock never starts a
//     thundering herd; "1" (write unlock) wakes every waiting reader and
//     one other waiter; a grant wakes its grantee;
//   - WakeCount (semaphores): as many waiters as the payload's free permits;
//     a waiter that needs more than that passes its wake-up on (Tried);
//   - WakeZero (latches): "0" (the count reached zero) every waiter, any
//     other payload none.
//
// In every mode a subscription's confirmation wakes every waiter: no
// message can be missed from then on, and one on a dead connection was.
type Mode uint8

const (
	WakeLock Mode = iota
	WakeCount
	WakeZero
)

// Config is what a Hub is built from.
type Config struct {
	// Client is the caller's go-redis client; nil: the channel table
	// alone (tests).
	Client  redis.UniversalClient
	Sharded bool         // subscribe with SSUBSCRIBE; on a cluster, one connection per master (route.go)
	Log     *slog.Logger // debug records; nil: none
	// Slots, when set, re-reads a cluster's slot maps (package calls),
	// under the hub's lock: when a connection failed without a reply or
	// was refused (Failed), and when a channel's slot moved (Reload). nil:
	// never.
	Slots *calls.SlotMaps
}

// A Hub is where waiters sleep (see the package doc).
type Hub struct {
	seed     maphash.Seed
	shards   [nShards]shard
	closed   atomic.Bool
	nEntries atomic.Int32 // read without a lock by the uncontended path (Active)
	// aliases maps an entry's companion channel (entry.also) to the
	// *entry, for the grants published there (offer.go).
	aliases sync.Map
	waiters sync.Pool // of *Waiter, reset
	links   links     // what subscribes the table's channels (conn.go)
}

const nShards = 64

type shard struct {
	mu      sync.Mutex
	entries map[string]*entry
	_       [40]byte // keeps neighbouring shards' mutexes off one cache line
}

// An entry is a channel waited on.
type entry struct {
	name string
	key  string // the lock's key, watched while waited for (track.go); "": none
	sh   *shard
	mode Mode
	also string // this client's grant channel for the lock ("": none; offer.go)

	// Guarded by sh.mu.
	waiters []*Waiter
	// readyGen is the subscription generation the server confirmed; the
	// entry is ready while it is the current one (gen).
	readyGen uint64
	linger   *time.Timer // pending unsubscribe once no one waits
	// inflight counts the woken waiters whose try has not finished: a
	// hand-off in flight (FIFO in the package doc).
	inflight int
	handOffs int // local hand-offs since the last unlock message (offer.go)
	// remote: other processes wait on the lock too: a newcomer tries
	// before it sleeps, so it is queued for grants.
	remote bool
	// counts numbers the count messages delivered (WakeCount), free is the
	// last one's payload, the permits it said were free, less those its
	// waiters took since.
	counts uint64
	free   int

	gen atomic.Uint64 // subscribes sent for the entry; written under links.mu
	// conn is the connection it is (being) subscribed on; placing says it
	// waits for one (route.go). Both guarded by links.mu.
	conn    *subConn
	placing bool
	lastMsg atomic.Int64 // when a message last came on the channel (Unix ns; track.go)
}

// ready reports whether the entry's current subscription is confirmed.
// e.sh.mu is held.
func (e *entry) ready() bool {
	return e.readyGen != 0 && e.readyGen == e.gen.Load()
}

// A Waiter is one goroutine waiting on a channel: it sleeps on C.
type Waiter struct {
	c        chan struct{} // receives a signal when the lock may be free
	e        *entry
	shared   bool // a reader: woken with every other reader
	woken    bool // signalled, its try not finished (counted in e.inflight)
	deferred bool // a newcomer behind a hand-off in flight: signalled when e.inflight drops to 0
	// untried: it sleeps without a try of its own (see Undefer), so it
	// knows no holder's TTL and counts on the waiters ahead of it.
	untried bool
	// need is the permits it waits for (WakeCount; 0: none said), count
	// the count message (entry.counts) its latest signal was for.
	need  int
	count uint64

	// Offers (offer.go). field and px are the owner token and lease a
	// release hands the lock over with ("": it cannot be handed it).
	field  string
	px     any
	parked bool       // sleeping: a release may offer it the lock
	offer  OfferState // where an offer to it stands
	marker string     // the offer's request marker, or a grant's nonce
	sent   time.Time  // when the offer's script was sent
	queued bool       // a try queued it in Redis for grants
}

// C receives a signal when the lock may be free or an offer's outcome is in.
func (w *Waiter) C() <-chan struct{} { return w.c }

const (
	// subscriptionLinger keeps a channel subscribed a while after its last
	// waiter left: under contention waiters come and go all the time.
	subscriptionLinger = 250 * time.Millisecond
	// HandoffWait bounds how long a newcomer lets a hand-off in flight
	// (a woken waiter's try, one round trip) finish before its own try.
	HandoffWait = 50 * time.Millisecond
	// UnlockGrace is how long a newcomer waits for an unlock message in
	// transit, when this client has waiters on the lock but none is woken.
	UnlockGrace = 2 * time.Millisecond
)

// New returns a hub. It connects only when a waiter first joins.
func New(cfg Config) *Hub {
	h := &Hub{seed: maphash.MakeSeed()}
	for i := range h.shards {
		h.shards[i].entries = make(map[string]*entry)
	}
	h.links.init(h, cfg)
	h.waiters.New = func() any { return &Waiter{c: make(chan struct{}, 1)} }
	return h
}

func (h *Hub) shard(channel string) *shard {
	return &h.shards[maphash.String(h.seed, channel)%nShards]
}

// lock locks channel's shard and returns it with channel's entry (nil:
// none); the caller unlocks sh.mu.
func (h *Hub) lock(channel string) (sh *shard, e *entry) {
	sh = h.shard(channel)
	sh.mu.Lock()
	return sh, sh.entries[channel]
}

// Active reports whether any channel is subscribed or being subscribed;
// if not, the uncontended path skips the hub.
func (h *Hub) Active() bool { return h.nEntries.Load() > 0 }

// Attach registers a waiter on channel before its first try, if the
// channel's subscription is confirmed (nil otherwise: the caller tries,
// then joins). With fifo, a newcomer that finds a hand-off in flight, or
// other waiters, is deferred: it waits on C before trying (InFlight,
// Undefer).
func (h *Hub) Attach(channel string, shared, fifo bool) (w *Waiter, deferred bool) {
	sh, e := h.lock(channel)
	defer sh.mu.Unlock()
	if h.closed.Load() || e == nil || !e.ready() {
		return nil, false
	}
	// Where other processes wait too, the order is the queue in Redis: a
	// newcomer joins it with its try.
	deferred = fifo && !e.remote && (e.inflight > 0 || len(e.waiters) > 0)
	w = h.addLocked(e, shared)
	w.deferred = deferred
	return w, deferred
}

// Undefer ends w's deferral: it takes its place in line at once, without
// a try of its own (untried) until its first wake-up.
func (h *Hub) Undefer(w *Waiter) {
	w.e.sh.mu.Lock()
	w.deferred, w.untried = false, true
	w.e.sh.mu.Unlock()
}

// InFlight reports whether w is still deferred behind a hand-off in
// flight (its grace for an unlock message in transit is over).
func (h *Hub) InFlight(w *Waiter) bool {
	w.e.sh.mu.Lock()
	defer w.e.sh.mu.Unlock()
	return w.deferred && w.e.inflight > 0
}

// A Sub says what a channel is, for the waiter that subscribes it.
type Sub struct {
	Mode Mode
	Key  string // the lock's key, watched while waited for (track.go); "": none
	// Also is a companion channel subscribed with the channel in one
	// command, where grants to this client's waiters come ("": none).
	Also string
}

// Join registers a waiter on channel, subscribing as s says if nobody
// else waits on it. ready reports whether the subscription is confirmed
// already: then the caller tries again at once, else the confirmation
// wakes it. w is nil after Close.
func (h *Hub) Join(channel string, shared bool, s Sub) (w *Waiter, ready bool) {
	sh, e := h.lock(channel)
	defer sh.mu.Unlock()
	if h.closed.Load() {
		return nil, false
	}
	if e == nil {
		e = &entry{name: channel, key: s.Key, sh: sh, mode: s.Mode, also: s.Also}
		sh.entries[channel] = e
		h.nEntries.Add(1)
		if s.Also != "" {
			h.aliases.Store(s.Also, e)
		}
		h.links.mu.Lock()
		h.links.subscribeLocked(e)
		h.links.mu.Unlock()
	}
	return h.addLocked(e, shared), e.ready()
}

// Subscribed reports whether channel's subscription is confirmed (with
// grants: with a companion channel).
func (h *Hub) Subscribed(channel string, grants bool) bool {
	if !h.Active() {
		return false
	}
	sh, e := h.lock(channel)
	defer sh.mu.Unlock()
	return e != nil && e.ready() && (!grants || e.also != "")
}

// addLocked adds a pooled waiter to e's. e.sh.mu is held.
func (h *Hub) addLocked(e *entry, shared bool) *Waiter {
	if e.linger != nil {
		e.linger.Stop()
	}
	w := h.waiters.Get().(*Waiter)
	w.e, w.shared = e, shared
	e.waiters = append(e.waiters, w)
	return w
}

// Need says that w waits for n permits (WakeCount): a wake-up for fewer
// is not its to use (see Tried).
func (h *Hub) Need(w *Waiter, n int) {
	w.e.sh.mu.Lock()
	w.need = n
	w.e.sh.mu.Unlock()
}

// Tried tells the hub that w finished a try. A wake-up it used is spent,
// unless handOn (the try did not take the lock, or the permits): another
// waiter goes first (a reader behind a waiting writer), and the wake-up
// goes to the next one; on a semaphore's channel (WakeCount) only a
// wake-up for fewer permits than w needs goes on (see handOnCount). A
// signal pending in C came after the try started: w uses it on its next
// wait. queued: the try queued w in Redis for grants.
func (h *Hub) Tried(w *Waiter, handOn, queued bool) {
	e := w.e
	e.sh.mu.Lock()
	defer e.sh.mu.Unlock()
	w.deferred, w.untried = false, false
	w.queued = w.queued || queued
	if !w.woken || len(w.c) > 0 {
		return
	}
	spentLocked(w)
	switch {
	case !handOn:
		if e.mode == WakeCount && w.count == e.counts {
			e.free -= w.need // took them: what is left goes on (handOnCount)
		}
	case e.mode == WakeCount:
		handOnCount(e, w)
	default:
		wakeOne(e, w)
	}
}

// handOnCount passes on the wake-up of w, which did not take the permits
// it needs, if the latest count message woke it: what is left of the
// permits it said were free (less what the waiters it woke took) may
// serve the longest waiter that message has not woken and that needs no
// more than that (one that needs more cannot be served by it; one that
// said nothing may). w needed more than were left, or others took them
// (a newcomer, another process: then the next try is in vain, once).
// Each waiter is woken at most once per message, so a wake-up goes down
// the line once and stops. e.sh.mu is held.
func handOnCount(e *entry, w *Waiter) {
	if w.count != e.counts {
		return
	}
	for _, x := range e.waiters {
		if x.count != e.counts && x.need <= e.free && signal(e, x) {
			return
		}
	}
}

// spentLocked ends w's hand-off and lets deferred newcomers try once no
// hand-off is in flight. w.e.sh.mu is held.
func spentLocked(w *Waiter) {
	e := w.e
	w.woken = false
	if e.inflight--; e.inflight > 0 {
		return
	}
	for _, x := range e.waiters {
		if x.deferred {
			x.deferred = false
			select {
			case x.c <- struct{}{}:
			default:
			}
		}
	}
}

// Leave unregisters w and takes it back. A waiter that did not acquire
// passes a wake-up it did not use up to the next waiter.
func (h *Hub) Leave(w *Waiter, acquired bool) {
	e := w.e
	sh := e.sh
	sh.mu.Lock()
	if i := slices.Index(e.waiters, w); i >= 0 {
		e.waiters = slices.Delete(e.waiters, i, i+1)
	}
	unused := len(w.c) > 0 // stable under sh.mu; drained below
	if w.woken {
		unused = true
		spentLocked(w)
	}
	if unused && !acquired {
		wakeOne(e, nil)
	}
	if !acquired && !w.untried {
		wakeN(e, 1, true) // it slept on this one's TTL
	}
	if len(e.waiters) == 0 && sh.entries[e.name] == e && !h.closed.Load() {
		if e.linger == nil {
			e.linger = time.AfterFunc(subscriptionLinger, func() { h.expire(e) })
		} else {
			e.linger.Reset(subscriptionLinger)
		}
	}
	sh.mu.Unlock()
	select { // back to the pool, reset
	case <-w.c:
	default:
	}
	*w = Waiter{c: w.c}
	h.waiters.Put(w)
}

// expire unsubscribes e if still nobody waits on it.
func (h *Hub) expire(e *entry) {
	sh := e.sh
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if h.closed.Load() || sh.entries[e.name] != e || len(e.waiters) > 0 {
		return
	}
	delete(sh.entries, e.name)
	h.nEntries.Add(-1)
	h.aliases.CompareAndDelete(e.also, e)
	// Under sh.mu: a join's subscribe is queued after this unsubscribe.
	h.links.mu.Lock()
	h.links.unsubscribeLocked(e)
	h.links.mu.Unlock()
}

// deliver handles a message published on channel.
func (h *Hub) deliver(channel, payload string) {
	sh, e := h.lock(channel)
	if e == nil {
		sh.mu.Unlock()
		h.deliverGrant(channel, payload) // a companion channel's, if any
		return
	}
	defer sh.mu.Unlock()
	e.lastMsg.Store(time.Now().UnixNano())
	switch e.mode {
	case WakeCount:
		n, err := strconv.Atoi(payload)
		if err != nil {
			n = 1
		}
		e.counts++
		e.free = n
		wakeN(e, n, false)
	case WakeZero:
		if payload == UnlockMessage {
			wakeN(e, len(e.waiters), false)
		}
	default:
		e.handOffs = 0
		nonce, grant := strings.CutPrefix(payload, GrantPrefix)
		switch {
		case payload == ReadUnlockMessage:
			wakeReaders(e)
		case !grant || !grantFirst(e, nonce):
			wakeOne(e, nil)
		}
	}
}

// confirmed marks e's subscription of generation gen confirmed and wakes
// its waiters, unless e was dropped or subscribed again meanwhile.
func (h *Hub) confirmed(e *entry, gen uint64) {
	e.sh.mu.Lock()
	defer e.sh.mu.Unlock()
	if e.sh.entries[e.name] == e && e.gen.Load() == gen {
		e.readyGen = gen
		wakeN(e, len(e.waiters), false)
	}
}

// wakeEntries wakes every waiter of entries still in the table (their
// connection died). h.links.mu is not held.
func wakeEntries(entries []*entry) {
	for _, e := range entries {
		e.sh.mu.Lock()
		if e.sh.entries[e.name] == e {
			wakeN(e, len(e.waiters), false)
		}
		e.sh.mu.Unlock()
	}
}

// waitedOn reports, under e.sh.mu, whether e is still in the table and
// has waiters.
func (e *entry) waitedOn() bool { return e.sh.entries[e.name] == e && len(e.waiters) > 0 }

// wakeLongest wakes the longest waiter of the first of entries (one
// lock's, the longest waiting first) still in the table with waiters, and
// every reader with it, as a write unlock would (a key found gone): an
// entry whose waiters all left passes the wake-up on. h.links.mu is not
// held.
func wakeLongest(entries []*entry) {
	for _, e := range entries {
		e.sh.mu.Lock()
		live := e.waitedOn()
		if live {
			wakeReaders(e)
		}
		e.sh.mu.Unlock()
		if live {
			return
		}
	}
}

// signal sends w a wake-up unless one is pending; it reports whether it
// did. The wake-up is for the latest count message (handOnCount).
func signal(e *entry, w *Waiter) bool {
	select {
	case w.c <- struct{}{}:
	default:
		return false
	}
	w.deferred, w.count = false, e.counts
	if !w.woken {
		w.woken = true
		e.inflight++
	}
	return true
}

// wakeReaders signals every reader and the longest-waiting other waiter.
func wakeReaders(e *entry) {
	writer := false
	for _, w := range e.waiters {
		if !w.shared && writer {
			continue
		}
		writer = writer || !w.shared
		signal(e, w)
	}
}

// wakeOne signals the longest-waiting waiter (other than skip) that has no
// signal pending, a writer before a reader (readers were not blocked by
// readers).
func wakeOne(e *entry, skip *Waiter) {
	for _, exclusive := range []bool{true, false} {
		for _, w := range e.waiters {
			if w != skip && w.shared != exclusive && signal(e, w) {
				return
			}
		}
	}
}

// wakeN signals the n longest-waiting waiters that have no signal pending;
// with untried, the n longest-waiting that have not tried yet, one with a
// signal pending counting among them (it tries anyway).
func wakeN(e *entry, n int, untried bool) {
	for _, w := range e.waiters {
		if n <= 0 {
			return
		}
		if (!untried || w.untried) && (signal(e, w) || untried) {
			n--
		}
	}
}

// Idle counts the waiters on channel's confirmed subscription with no
// wake-up pending or in use that are parked (or, with parkedOnly false,
// cannot be offered the lock): a probe for tests.
func (h *Hub) Idle(channel string, parkedOnly bool) int {
	sh, e := h.lock(channel)
	defer sh.mu.Unlock()
	if e == nil || !e.ready() {
		return 0
	}
	n := 0
	for _, w := range e.waiters {
		if !w.woken && len(w.c) == 0 && (w.parked || !parkedOnly && w.field == "") {
			n++
		}
	}
	return n
}

// Close stops every goroutine of the hub and closes its connections.
func (h *Hub) Close() {
	h.closed.Store(true)
	for i := range h.shards {
		sh := &h.shards[i]
		sh.mu.Lock()
		for _, e := range sh.entries {
			if e.linger != nil {
				e.linger.Stop()
			}
		}
		sh.mu.Unlock()
	}
	h.links.close()
}
