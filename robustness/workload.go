package robustness

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime"
)

// WorkerConfig is what a worker process is told (as JSON in its
// environment) by the harness.
type WorkerConfig struct {
	Proc     int    `json:"proc"`
	Seed     int64  `json:"seed"`
	LockAddr string `json:"lockAddr"` // the lock server, through this process's fault proxy
	// ClusterNodes, on a Redis Cluster (LockAddr is then empty): each
	// node's address, as the cluster names it, to the address of this
	// process's fault proxy in front of it.
	ClusterNodes map[string]string `json:"clusterNodes,omitempty"`
	RedAddrs     []string          `json:"redAddrs"`    // the RedLock nodes, through this process's fault proxies
	StorageAddr  string            `json:"storageAddr"` // the guarded state: never faulted
	History      string            `json:"history"`     // the file the events go to
	Goroutines   int               `json:"goroutines"`
	// Sharing groups the goroutines onto Clients (Config.Sharing): 0
	// draws the groups from Seed and Proc, -1 gives each goroutine its
	// own Client, n > 1 puts every n goroutines on one.
	Sharing  int           `json:"sharing,omitempty"`
	Watchdog time.Duration `json:"watchdog"`
	Liveness time.Duration `json:"liveness"` // the final sweep's wait time
	Kinds    []string      `json:"kinds"`    // the kinds drawn from
}

// The keys of each kind. They are few, so that operations contend. A
// multi-lock's members are reentrant locks (and, for the non-atomic one,
// a fair lock): its holds exclude the holds of its members' keys.
var (
	reentrantKeys = []string{"re:0", "re:1"}
	fairKeys      = []string{"fair:0"}
	multiMembers  = map[string][]string{
		KindMultiAtomic: {"re:0", "re:1"},   // all reentrant, one server: one script
		KindMulti:       {"fair:0", "re:1"}, // a fair member: taken one by one
	}
)

// Keys lists the keys each kind works on.
func Keys(kind string) []string {
	switch kind {
	case KindReentrant:
		return reentrantKeys
	case KindFair:
		return fairKeys
	case KindRead, KindWrite:
		return []string{"rw:0"}
	case KindMultiAtomic:
		return []string{"multi-atomic"}
	case KindMulti:
		return []string{"multi"}
	case KindRed:
		return []string{"red:0"}
	case KindFenced:
		return []string{"fenced:0"}
	case KindSemaphore:
		return []string{"sem:0"}
	case KindPlain:
		return []string{"plain:0"}
	case KindLatch:
		return []string{"latch:0"}
	}
	return nil
}

// AllKinds are the kinds the workload draws from.
var AllKinds = []string{KindReentrant, KindFair, KindRead, KindWrite, KindMultiAtomic, KindMulti,
	KindRed, KindFenced, KindSemaphore, KindPlain, KindLatch}

// Sizes of the synchronizers.
const (
	SemaphorePermits = 2
	PlainPermits     = 2
	LatchCount       = 3
	// QueueTimeout is the fair locks' queue timeout: a waiter killed while
	// queued holds up the queue for that long (Redisson's default is 5m).
	QueueTimeout = 2 * time.Second
)

// CounterKey is the storage key of the counter a hold of lockKey guards;
// FenceKey the fenced register of a fenced lock.
func CounterKey(lockKey string) string { return "guarded:" + lockKey }
func FenceKey(lockKey string) string   { return "fence:" + lockKey }

// fenceWrite stores a token in a fenced register only if it is not lower
// than the last one the register accepted, as a storage that checks
// fencing tokens does.
var fenceWrite = redis.NewScript(`
local last = tonumber(redis.call('get', KEYS[1]) or '0')
local t = tonumber(ARGV[1])
if t < last then return 0 end
redis.call('set', KEYS[1], ARGV[1])
return 1`)

// RunWorker is a worker process: cfg.Goroutines goroutines, grouped onto
// lockgen Clients (shareGroups: some share one Client, as a service's
// goroutines do, others have their own), draw random operations until
// the harness writes "sweep" to stdin; then every goroutine stops, and
// the process takes each key once (the liveness sweep), closes its
// Clients and exits.
func RunWorker(cfg WorkerConfig, stdin io.Reader) error {
	rec, err := NewRecorder(cfg.History, cfg.Proc)
	if err != nil {
		return err
	}
	defer rec.Close()
	w := &worker{cfg: cfg, rec: rec}
	w.rdb = lockClient(cfg)
	defer w.rdb.Close()
	for _, a := range cfg.RedAddrs {
		n := redis.NewClient(&redis.Options{Addr: a})
		defer n.Close()
		w.red = append(w.red, n)
	}
	w.storage = redis.NewClient(&redis.Options{Addr: cfg.StorageAddr})
	defer w.storage.Close()

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	stalls := make(chan struct{})
	defer close(stalls)
	go w.watchStalls(stalls)
	gs := make([]*goroutine, cfg.Goroutines)
	var groups []*clientGroup
	for i, gi := range shareGroups(cfg.Seed, cfg.Proc, cfg.Goroutines, cfg.Sharing) {
		if gi == len(groups) { // the group's first goroutine names it
			grp := &clientGroup{w: w, name: fmt.Sprintf("p%d-g%d", cfg.Proc, i)}
			if err := grp.start(); err != nil {
				stop()
				return err
			}
			groups = append(groups, grp)
		}
		groups[gi].size++
		gs[i] = &goroutine{w: w, id: i, grp: groups[gi], rng: rand.New(rand.NewPCG(uint64(cfg.Seed), uint64(cfg.Proc)<<16|uint64(i)))}
	}
	for _, g := range gs {
		g.cl = g.grp.cur.Load()
		wg.Add(1)
		go func() {
			defer wg.Done()
			g.run(ctx)
		}()
	}
	// The harness's word, or its end.
	sc := bufio.NewScanner(stdin)
	for sc.Scan() && strings.TrimSpace(sc.Text()) != "sweep" {
	}
	stop()
	wg.Wait()
	// Every goroutine returned, so no Client is being replaced: each
	// group's current one is open.
	gs[0].cl = gs[0].grp.cur.Load()
	w.sweep(gs[0])
	return w.closeAll(groups)
}

// shareGroups assigns each of n goroutines of process proc a Client
// group (an index; groups are numbered in order of their first
// goroutine). sharing is WorkerConfig.Sharing: -1 gives each goroutine
// its own Client; n > 1 puts every n in one group; 0 draws it from the
// seed and the process, a stream apart from the goroutines' operations
// (a seed's operations are the same as before sharing was drawn): a
// quarter of the processes give each goroutine its own Client, the
// others put the first k (2..n) goroutines on one Client and give the
// rest their own, so that a run has both.
func shareGroups(seed int64, proc, n, sharing int) []int {
	k := 1 // the goroutines of the shared group
	switch {
	case sharing > 1:
		k = sharing
	case sharing == 0 && n > 1:
		rng := rand.New(rand.NewPCG(uint64(seed), 1<<62|uint64(proc)))
		if rng.IntN(4) > 0 {
			k = 2 + rng.IntN(n-1)
		}
	}
	out := make([]int, n)
	for i := range out {
		if sharing > 1 {
			out[i] = i / k
		} else if i < k {
			out[i] = 0
		} else {
			out[i] = i - k + 1
		}
	}
	return out
}

type worker struct {
	cfg     WorkerConfig
	rec     *Recorder
	rdb     redis.UniversalClient
	red     []redis.UniversalClient
	storage *redis.Client
}

// lockClient is the worker's client of the lock server, or of the
// cluster: every node is reached through the process's proxy for it, the
// nodes it learns of from the cluster too.
func lockClient(cfg WorkerConfig) redis.UniversalClient {
	if len(cfg.ClusterNodes) == 0 {
		return redis.NewClient(&redis.Options{Addr: cfg.LockAddr})
	}
	var seeds []string
	for node := range cfg.ClusterNodes {
		seeds = append(seeds, node)
	}
	slices.Sort(seeds)
	var d net.Dialer
	return redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: seeds,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if p, ok := cfg.ClusterNodes[addr]; ok {
				addr = p
			}
			return d.DialContext(ctx, network, addr)
		},
	})
}

// goroutine is one worker goroutine and the Client it works through.
type goroutine struct {
	w   *worker
	id  int
	rng *rand.Rand
	grp *clientGroup // the goroutines that share its Client (often it alone)
	// cl is the Client this goroutine's operation uses, read from grp
	// when the operation starts: another goroutine of the group may close
	// it meanwhile, and the operation sees that Client's errors.
	cl *groupClient
}

// clientGroup is the Client that one or more goroutines of a process
// share, replaced after each Close or Shutdown: any goroutine of the
// group may close it (closeClient), ending every sharer's holds and
// failing every sharer's waits, calls on it made after the close fail
// with the runtime's errors, and the goroutine that closed it makes the
// group's next one.
type clientGroup struct {
	w    *worker
	name string // the Client's Name: "p<proc>-g<its first goroutine>"
	size int    // how many goroutines share it
	cur  atomic.Pointer[groupClient]
}

// groupClient is one generation of a group's Client.
type groupClient struct {
	c   *runtime.Client
	gen int // 1, 2, ...: Close makes a new one
	// closing is set by the one goroutine that closes this Client;
	// replaced is closed once the group's next Client is current.
	closing  atomic.Bool
	replaced chan struct{}
}

// start makes the group's next Client current. NewClient fails while no
// node answers (on a cluster, after 10 s of probing its pub/sub flavour),
// which a fault can outlast: the first Client must be made at once, a
// replacement is tried again until the faults heal, as an application's
// restart loop would.
func (grp *clientGroup) start() error {
	prev := grp.cur.Load()
	for {
		c, err := runtime.NewClient(grp.w.rdb, &runtime.Options{
			WatchdogTimeout: grp.w.cfg.Watchdog,
			ReleaseTimeout:  time.Second,
			RedLockNodes:    grp.w.red,
			Logger:          slog.New(slog.DiscardHandler),
			Name:            grp.name,
		})
		if err == nil {
			next := &groupClient{c: c, gen: 1, replaced: make(chan struct{})}
			if prev != nil {
				next.gen = prev.gen + 1
			}
			grp.cur.Store(next)
			if prev != nil {
				close(prev.replaced)
			}
			return nil
		}
		if prev == nil {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// current is the group's Client for a new operation: while another
// goroutine is closing it, the one that replaces it (or, once ctx is
// done, the closed one).
func (grp *clientGroup) current(ctx context.Context) *groupClient {
	for {
		cl := grp.cur.Load()
		if !cl.closing.Load() {
			return cl
		}
		select {
		case <-cl.replaced:
		case <-ctx.Done():
			return cl
		}
	}
}

func (g *goroutine) run(ctx context.Context) {
	kinds := g.w.cfg.Kinds
	if len(kinds) == 0 {
		kinds = AllKinds
	}
	for ctx.Err() == nil {
		if g.cl = g.grp.current(ctx); ctx.Err() != nil {
			break
		}
		kind := kinds[g.rng.IntN(len(kinds))]
		keys := Keys(kind)
		key := keys[g.rng.IntN(len(keys))]
		switch kind {
		case KindPlain:
			g.plainOp(ctx, key)
		case KindLatch:
			g.latchOp(ctx, key)
		default:
			g.holdOp(ctx, kind, key)
		}
		if g.rng.IntN(100) < 2 { // now and then a Client is closed and replaced
			g.closeClient()
		}
	}
}

// StallLimit is the longest a worker may not run before it records a
// stall (FaultStall): the lease drift margin of a short fixed lease is
// about this long (1% + 5 ms), so a stall this long at a hold's deadline
// can let its ctx end after the key, as a SIGSTOP can.
const StallLimit = 10 * time.Millisecond

// watchStalls records the stretches in which this process did not run:
// it wakes every millisecond, and a wake-up later than StallLimit after
// the previous one is a stall, recorded as a fault on the process (with
// negative ids, apart from the harness's).
func (w *worker) watchStalls(stop <-chan struct{}) {
	const tick = time.Millisecond
	t := time.NewTicker(tick)
	defer t.Stop()
	last := Now()
	id := -int64(w.cfg.Proc+1) << 32
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		now := Now()
		if now-last > int64(StallLimit) {
			id--
			w.rec.Record(Event{Op: id, Ev: EvStart, Kind: FaultStall, Key: ProcTarget(w.cfg.Proc), T: last + int64(tick)})
			w.rec.Record(Event{Op: id, Ev: EvEnd, T: now})
		}
		last = now
	}
}

func (g *goroutine) event(e Event) {
	e.G, e.Client, e.Shared = g.id, g.cl.gen, g.shared()
	g.w.rec.Record(e)
}

// shared names the Client g works through when goroutines share it ("":
// its own).
func (g *goroutine) shared() string {
	if g.grp.size > 1 {
		return g.grp.name
	}
	return ""
}

// outcome classifies an error: a definite failure (not acquired, quorum
// not reached) changed nothing; anything else may have.
func outcome(err error) (string, string) {
	switch {
	case err == nil:
		return OutOK, ""
	case errors.Is(err, runtime.ErrNotAcquired), errors.Is(err, runtime.ErrQuorum):
		return OutFail, err.Error()
	}
	return OutUnknown, err.Error()
}

func (g *goroutine) pickWait() time.Duration {
	switch n := g.rng.IntN(10); {
	case n < 2:
		return 0
	case n < 4:
		return 20 * time.Millisecond
	case n < 7:
		return 300 * time.Millisecond
	case n < 9:
		return 1500 * time.Millisecond
	}
	return 4 * time.Second
}

func (g *goroutine) pickLease() time.Duration {
	if g.rng.IntN(10) < 6 {
		return runtime.Watchdog
	}
	return time.Duration(300+g.rng.IntN(1700)) * time.Millisecond
}

// pickHold is how long a holder works: mostly briefly, sometimes long
// enough for faults to strike it.
func (g *goroutine) pickHold() time.Duration {
	switch n := g.rng.IntN(100); {
	case n < 70:
		return time.Duration(g.rng.IntN(20)) * time.Millisecond
	case n < 95:
		return time.Duration(50+g.rng.IntN(450)) * time.Millisecond
	}
	return time.Duration(1000+g.rng.IntN(3000)) * time.Millisecond
}

// lockHandle takes and gives back one kind of lock.
type lockHandle struct {
	acquire func(ctx context.Context, wait, lease time.Duration) (context.Context, int64, error)
	release func(ctx context.Context) error
	reenter bool // a nested acquire with the hold's ctx re-enters
}

func (g *goroutine) handle(kind, key string, permits int) lockHandle {
	c := g.cl.c
	mutex := func(m *runtime.Mutex) lockHandle {
		return lockHandle{
			acquire: func(ctx context.Context, wait, lease time.Duration) (context.Context, int64, error) {
				h, err := m.TryLock(ctx, wait, lease)
				return h, 0, err
			},
			release: m.Unlock, reenter: true,
		}
	}
	switch kind {
	case KindReentrant:
		return mutex(c.Mutex(key, runtime.LockOptions{}))
	case KindFair:
		return mutex(c.FairLock(key, runtime.LockOptions{QueueTimeout: QueueTimeout}))
	case KindRead:
		return mutex(c.ReadWrite(key, runtime.LockOptions{WritersFirst: true}).Read())
	case KindWrite:
		return mutex(c.ReadWrite(key, runtime.LockOptions{WritersFirst: true}).Write())
	case KindMultiAtomic, KindMulti:
		var ms []*runtime.Mutex
		for _, k := range multiMembers[kind] {
			if strings.HasPrefix(k, "fair:") {
				ms = append(ms, c.FairLock(k, runtime.LockOptions{QueueTimeout: QueueTimeout}))
			} else {
				ms = append(ms, c.Mutex(k, runtime.LockOptions{}))
			}
		}
		l := c.MultiLock(runtime.LockOptions{}, ms...)
		return lockHandle{
			acquire: func(ctx context.Context, wait, lease time.Duration) (context.Context, int64, error) {
				h, err := l.TryLock(ctx, wait, lease)
				return h, 0, err
			},
			release: l.Unlock,
		}
	case KindRed:
		l := c.RedLock(key, runtime.LockOptions{})
		return lockHandle{
			acquire: func(ctx context.Context, wait, lease time.Duration) (context.Context, int64, error) {
				h, err := l.TryLock(ctx, wait, lease)
				return h, 0, err
			},
			release: l.Unlock,
		}
	case KindFenced:
		f := c.FencedLock(key, runtime.LockOptions{})
		return lockHandle{acquire: f.TryLockFenced, release: f.Unlock, reenter: true}
	case KindSemaphore:
		return lockHandle{
			acquire: func(ctx context.Context, wait, lease time.Duration) (context.Context, int64, error) {
				s := c.Semaphore(key, runtime.SemaphoreOptions{Permits: SemaphorePermits, Lease: lease})
				h, err := s.TryAcquire(ctx, permits, wait)
				return h, 0, err
			},
			release: c.Semaphore(key, runtime.SemaphoreOptions{Permits: SemaphorePermits}).Release,
		}
	}
	panic("robustness: no handle for kind " + kind)
}

// holdOp takes a lock (or permits) with a random wait time and lease,
// works under it (guarded writes, a nested hold, a cancelled ctx, a
// Close), and releases it.
func (g *goroutine) holdOp(ctx context.Context, kind, key string) {
	wait, lease := g.pickWait(), g.pickLease()
	permits := 1
	if kind == KindSemaphore && g.rng.IntN(3) == 0 {
		permits = 2
	}
	h := g.handle(kind, key, permits)
	// The caller's ctx: sometimes it ends during the wait, sometimes it is
	// cancelled while the lock is held.
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	if wait > 0 && g.rng.IntN(8) == 0 {
		var c2 context.CancelFunc
		actx, c2 = context.WithTimeout(actx, time.Duration(g.rng.Int64N(int64(wait))))
		defer c2()
	}
	op := g.w.rec.NextOp()
	inv := Event{Op: op, Ev: EvInvoke, Kind: kind, F: FAcquire, Key: key, Keys: multiMembers[kind],
		Wait: int64(wait), Lease: int64(lease)}
	if kind == KindSemaphore {
		inv.N = int64(permits)
	}
	g.event(inv)
	hctx, token, err := h.acquire(actx, wait, lease)
	out, msg := outcome(err)
	ret := Event{T: Now(), Op: op, Ev: EvReturn, Outcome: out, Err: msg, N: token}
	if kind == KindSemaphore {
		ret.N = int64(permits)
	}
	g.event(ret)
	if err != nil {
		return
	}
	g.watchDone(op, hctx, ret.T)

	end := time.Now().Add(g.pickHold())
	for first := true; first || time.Now().Before(end); first = false {
		switch kind {
		case KindFenced:
			// A fenced writer does not look at its ctx: the storage's
			// fencing is what keeps a late write out.
			g.fencedWrite(op, key, token)
		case KindSemaphore, KindRead:
			// A permit guards nothing exclusive; a reader only reads.
		case KindMultiAtomic, KindMulti:
			g.guardedWrite(op, hctx, multiMembers[kind][0])
		default:
			g.guardedWrite(op, hctx, key)
		}
		if h.reenter && g.rng.IntN(6) == 0 {
			g.nested(hctx, kind, key, h)
		}
		if g.rng.IntN(40) == 0 {
			cancel() // the caller gives up while holding: the hold's ctx ends
		}
		if g.rng.IntN(150) == 0 {
			// Close or Shutdown while holding: the hold's ctx ends, and
			// every sharer's; Unlock still works.
			g.closeClient()
		}
		sleep(time.Duration(g.rng.IntN(int(max(time.Until(end), time.Millisecond)/4) + 1)))
	}
	g.event(Event{Op: op, Ev: EvRelease})
	err = h.release(hctx)
	out, msg = outcome(err)
	g.event(Event{Op: op, Ev: EvReleased, Outcome: out, Err: msg})
}

// watchDone records when the hold's ctx is done. A ctx done already when
// the acquire returned (its reply came after the hold's deadline) is
// recorded as done at the return, at.
func (g *goroutine) watchDone(op int64, hctx context.Context, at int64) {
	if err := context.Cause(hctx); err != nil {
		g.event(Event{T: at, Op: op, Ev: EvDone, Err: err.Error()})
		return
	}
	// The func runs on a goroutine of its own, while this one may replace
	// its Client (g.cl): the event is stamped with what holds now.
	id, gen, shared, rec := g.id, g.cl.gen, g.shared(), g.w.rec
	context.AfterFunc(hctx, func() {
		rec.Record(Event{Op: op, Ev: EvDone, Err: errString(context.Cause(hctx)), G: id, Client: gen, Shared: shared})
	})
}

// nested re-enters the lock with the hold's ctx, writes under it, and
// leaves again.
func (g *goroutine) nested(hctx context.Context, kind, key string, h lockHandle) {
	op := g.w.rec.NextOp()
	g.event(Event{Op: op, Ev: EvInvoke, Kind: kind, F: FAcquire, Key: key, Nested: true})
	nctx, token, err := h.acquire(hctx, 0, runtime.Watchdog)
	out, msg := outcome(err)
	g.event(Event{Op: op, Ev: EvReturn, Outcome: out, Err: msg, N: token})
	if err != nil {
		return
	}
	g.watchDone(op, nctx, Now())
	g.event(Event{Op: op, Ev: EvRelease})
	err = h.release(nctx)
	out, msg = outcome(err)
	g.event(Event{Op: op, Ev: EvReleased, Outcome: out, Err: msg})
}

// guardedWrite is a read-modify-write of the counter the lock guards, in
// two round trips, so that two holders at once would both read the same
// value.
//
// The write is recorded as invoked before the holder looks at its ctx, as
// an honest holder does before it writes: an ok write's invoke then comes
// before the hold's ctx was done, however the goroutines interleave (the
// done event is recorded after the cancellation, which came after the
// look). A holder that finds its ctx done writes nothing (outcome fail).
func (g *goroutine) guardedWrite(op int64, hctx context.Context, lockKey string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	g.event(Event{Op: op, Ev: EvWrite})
	if hctx.Err() != nil {
		g.event(Event{Op: op, Ev: EvWrote, Outcome: OutFail, Err: "not written: the hold's ctx is done"})
		return
	}
	k := CounterKey(lockKey)
	v, err := g.w.storage.Get(ctx, k).Int64()
	if errors.Is(err, redis.Nil) {
		v, err = 0, nil
	}
	if err == nil {
		// A moment between the read and the write, as real work has:
		// two holders at once would both read the same value.
		sleep(time.Duration(g.rng.IntN(500)) * time.Microsecond)
		err = g.w.storage.Set(ctx, k, v+1, 0).Err()
	}
	out, msg := outcome(err)
	g.event(Event{Op: op, Ev: EvWrote, N: v, Outcome: out, Err: msg})
}

// fencedWrite writes the hold's token to the fenced register.
func (g *goroutine) fencedWrite(op int64, lockKey string, token int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	g.event(Event{Op: op, Ev: EvWrite, N: token})
	r, err := fenceWrite.Run(ctx, g.w.storage, []string{FenceKey(lockKey)}, token).Int64()
	out, msg := outcome(err)
	if err == nil && r == 0 {
		out, msg = OutFail, "refused: a later token was accepted"
	}
	g.event(Event{Op: op, Ev: EvWrote, N: token, Outcome: out, Err: msg})
}

// plainOp is one operation on a plain semaphore: arm it, take permits and
// give them back, or read the free count.
func (g *goroutine) plainOp(ctx context.Context, key string) {
	p := g.cl.c.PlainSemaphore(key, "plain")
	op := g.w.rec.NextOp()
	switch n := g.rng.IntN(10); {
	case n < 2:
		g.event(Event{Op: op, Ev: EvInvoke, Kind: KindPlain, F: FSetCount, Key: key, N: PlainPermits})
		ok, err := p.TrySetPermits(ctx, PlainPermits)
		g.event(boolReturn(op, ok, err, 0))
	case n < 4:
		g.event(Event{Op: op, Ev: EvInvoke, Kind: KindPlain, F: FAvailable, Key: key})
		v, err := p.Available(ctx)
		out, msg := outcome(err)
		g.event(Event{Op: op, Ev: EvReturn, Outcome: out, Err: msg, N: int64(v)})
	default:
		k := 1 + g.rng.IntN(2)
		wait := g.pickWait()
		g.event(Event{Op: op, Ev: EvInvoke, Kind: KindPlain, F: FAcquire, Key: key, N: int64(k), Wait: int64(wait)})
		err := p.TryAcquire(ctx, k, wait)
		out, msg := outcome(err)
		g.event(Event{Op: op, Ev: EvReturn, Outcome: out, Err: msg, N: int64(k)})
		if err != nil {
			return
		}
		sleep(g.pickHold())
		op = g.w.rec.NextOp()
		g.event(Event{Op: op, Ev: EvInvoke, Kind: KindPlain, F: FRelease, Key: key, N: int64(k)})
		err = p.Release(context.WithoutCancel(ctx), k)
		out, msg = outcome(err)
		g.event(Event{Op: op, Ev: EvReturn, Outcome: out, Err: msg, N: int64(k)})
	}
}

// latchOp is one operation on a latch: arm it, count down, read it, or
// wait for it.
func (g *goroutine) latchOp(ctx context.Context, key string) {
	l := g.cl.c.Latch(key, runtime.LatchOptions{Count: LatchCount})
	op := g.w.rec.NextOp()
	switch n := g.rng.IntN(10); {
	case n < 2:
		g.event(Event{Op: op, Ev: EvInvoke, Kind: KindLatch, F: FSetCount, Key: key, N: LatchCount})
		ok, err := l.TrySetCount(ctx, LatchCount)
		g.event(boolReturn(op, ok, err, 0))
	case n < 5:
		g.event(Event{Op: op, Ev: EvInvoke, Kind: KindLatch, F: FCountDown, Key: key})
		err := l.CountDown(ctx)
		out, msg := outcome(err)
		g.event(Event{Op: op, Ev: EvReturn, Outcome: out, Err: msg})
	case n < 7:
		g.event(Event{Op: op, Ev: EvInvoke, Kind: KindLatch, F: FCount, Key: key})
		v, err := l.Count(ctx)
		out, msg := outcome(err)
		g.event(Event{Op: op, Ev: EvReturn, Outcome: out, Err: msg, N: v})
	default:
		wait := g.pickWait()
		g.event(Event{Op: op, Ev: EvInvoke, Kind: KindLatch, F: FAwait, Key: key, Wait: int64(wait)})
		err := l.TryAwait(ctx, wait)
		out, msg := outcome(err)
		g.event(Event{Op: op, Ev: EvReturn, Outcome: out, Err: msg})
	}
}

func boolReturn(op int64, ok bool, err error, n int64) Event {
	out, msg := outcome(err)
	if err == nil && !ok {
		out = OutFail
	}
	return Event{Op: op, Ev: EvReturn, Outcome: out, Err: msg, N: n}
}

// closeClient closes the Client this goroutine works through (recorded:
// holds of it end, those of every goroutine sharing it too), by Close or
// by Shutdown, and makes the group's next one. Only one goroutine closes
// a Client: when another closes it already (or has replaced it), this
// one does nothing. Sharers in the middle of an operation on it see its
// errors (ErrClosed, ErrDraining); their next operation waits for the
// replacement (clientGroup.current).
func (g *goroutine) closeClient() {
	cl := g.cl
	if !cl.closing.CompareAndSwap(false, true) {
		return
	}
	op := g.w.rec.NextOp()
	var err error
	if g.rng.IntN(2) == 0 {
		g.event(Event{Op: op, Ev: EvInvoke, F: FClose})
		err = cl.c.Close()
	} else {
		// Shutdown drains the Client and waits for its holds, which
		// this goroutine or its sharers may hold: its ctx then ends,
		// the holds are cut (their ctx ends) and given back in the
		// background, and Shutdown waits for that before it closes.
		g.event(Event{Op: op, Ev: EvInvoke, F: FShutdown})
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(g.rng.IntN(50))*time.Millisecond)
		err = cl.c.Shutdown(ctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			err = nil // the holds were cut, as asked
		}
	}
	out, msg := outcome(err)
	g.event(Event{Op: op, Ev: EvReturn, Outcome: out, Err: msg})
	_ = g.grp.start() // a replacement is tried until it is made
	g.cl = g.grp.cur.Load()
}

// sweep takes every lock and a permit of the semaphore once, with the
// liveness bound as wait time, after the workload stopped and the faults
// healed: each must be had.
func (w *worker) sweep(g *goroutine) {
	for _, kind := range []string{KindReentrant, KindFair, KindWrite, KindMultiAtomic, KindMulti, KindRed, KindFenced, KindSemaphore} {
		for _, key := range Keys(kind) {
			h := g.handle(kind, key, 1)
			op := w.rec.NextOp()
			g.event(Event{Op: op, Ev: EvInvoke, Kind: kind, F: FSweep, Key: key, Keys: multiMembers[kind],
				Wait: int64(w.cfg.Liveness), N: 1})
			hctx, token, err := h.acquire(context.Background(), w.cfg.Liveness, runtime.Watchdog)
			out, msg := outcome(err)
			g.event(Event{Op: op, Ev: EvReturn, Outcome: out, Err: msg, N: max(token, 1)})
			if err != nil {
				continue
			}
			g.watchDone(op, hctx, Now())
			g.event(Event{Op: op, Ev: EvRelease})
			err = h.release(hctx)
			out, msg = outcome(err)
			g.event(Event{Op: op, Ev: EvReleased, Outcome: out, Err: msg})
		}
	}
}

// closeAll closes every group's Client, each within a bound: a Close
// that does not return is a liveness failure.
func (w *worker) closeAll(groups []*clientGroup) error {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, grp := range groups {
			_ = grp.cur.Load().c.Close()
		}
	}()
	select {
	case <-done:
		return nil
	case <-time.After(10 * time.Second):
		return errors.New("close stuck: a Client's Close did not return within 10s")
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func sleep(d time.Duration) {
	if d > 0 {
		time.Sleep(d)
	}
}

// WorkerMain runs a worker from its environment (LOCKGEN_ROBUSTNESS_WORKER,
// the config as JSON) and returns its exit code.
func WorkerMain() int {
	var cfg WorkerConfig
	if err := json.Unmarshal([]byte(os.Getenv(WorkerEnv)), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "robustness worker: bad config:", err)
		return 2
	}
	if err := RunWorker(cfg, os.Stdin); err != nil {
		fmt.Fprintln(os.Stderr, "robustness worker:", err)
		return 1
	}
	return 0
}

// WorkerEnv names the environment variable that makes a test binary a
// worker process.
const WorkerEnv = "LOCKGEN_ROBUSTNESS_WORKER"
