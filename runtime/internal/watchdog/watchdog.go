package watchdog

import (
	"context"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/lua"
	"github.com/lockgen/lockgen/runtime/internal/calls"
	"github.com/lockgen/lockgen/runtime/internal/holds"
	"github.com/lockgen/lockgen/runtime/internal/leaseclock"
	"github.com/lockgen/lockgen/runtime/internal/renew"
	"github.com/lockgen/lockgen/runtime/internal/scripts"
)

// Watchdog is the one renewal loop of a Client. A release removes its hold
// from the registry before it is sent, so no renewal is scheduled after an
// unlock; one in flight finds the field gone.
type Watchdog struct {
	cfg    Config
	lease  any // the lease in ms, a script argument
	once   sync.Once
	done   chan struct{}
	timing renew.Timing // the registry's
	jobs   sync.WaitGroup
	// The calls go by node (lanes.go): on one server all in the lane one;
	// on a cluster (cluster, the renewal client) in the lane of their
	// master's address, which the loop adds and drops under mu. Each lane
	// has its node's admission gate; shut counts those closed.
	one     *lane
	cluster *redis.ClusterClient
	mu      sync.Mutex
	lanes   map[string]*lane
	shut    atomic.Int32
	// Used by the loop only: dials is the caller's pool's dial count
	// (dialled); lastDue the size of the last round not of every hold;
	// labelNext when the owner label is due; order, scratch and groups
	// SortDue's, UrgentFirst's and ByTimeLeft's scratch space.
	dials     uint64
	lastDue   int
	labelNext time.Time
	order     []uint64
	scratch   []holds.Due
	groups    []int
	// rounds keeps the Due slices of finished rounds for later ones (they
	// were most of what the watchdog allocated).
	rounds chan *round
}

// Config is what a Watchdog works with. Every field is required but Log.
type Config struct {
	Registry *holds.Registry       // the holds it renews, their lease, timing and slot grouping
	Caller   redis.UniversalClient // the caller's client: its pool tells of reconnects (dialled)
	Renewal  redis.UniversalClient // renewals and labels go through it (DeadlineClient)
	Life     context.Context       // ends with the Client: renewals in flight end with it
	Closed   <-chan struct{}       // closed when the Client closes: the loop stops
	Slots    *calls.SlotMaps       // told of failed calls: a dead master's slots move
	Label    Label                 // the Client's owner label, rewritten every period
	Log      *slog.Logger
	Warn     func(msg string, args ...any)                             // rate-limited
	Gone     func(h *holds.Hold) error                                 // the cause of a hold found gone
	Renewed  func(renewed, batches int, took time.Duration, err error) // reports a call
}

const (
	Workers        = 4 // bounds the renewal calls in flight to one node
	batchesPerCall = 8 // RenewBatch calls per pipeline
)

// New returns the watchdog of cfg, not started yet.
func New(cfg Config) *Watchdog {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	w := &Watchdog{cfg: cfg, lease: strconv.FormatInt(cfg.Registry.WatchdogLease().Milliseconds(), 10), timing: cfg.Registry.Timing(),
		done: make(chan struct{}), rounds: make(chan *round, Workers+1),
		cluster: clusterOf(cfg.Renewal), lanes: map[string]*lane{}}
	w.one = newLane(addrOf(cfg.Renewal), w.timing)
	return w
}

// Start starts the loop on first use (the first hold of any lease).
func (w *Watchdog) Start() { w.once.Do(func() { go w.loop() }) }

// Wait blocks until the loop (if started) has stopped once Config.Closed
// is closed; WaitJobs waits for the renewals in flight.
func (w *Watchdog) Wait() {
	w.once.Do(func() { close(w.done) }) // no loop may start after this
	<-w.done
}

// WaitJobs blocks until the renewal calls in flight have returned (Close
// calls it after closing the renewal client, which ends a call stuck on a
// dead connection).
func (w *Watchdog) WaitJobs() { w.jobs.Wait() }

func (w *Watchdog) loop() {
	defer close(w.done)
	ticker := time.NewTicker(w.timing.Tick)
	defer ticker.Stop()
	var lastPoke time.Time
	w.warm()
	w.renewLabel(time.Now())
	w.dialled() // takes the count
	for {
		select {
		case <-w.cfg.Closed:
			return
		case <-ticker.C:
		}
		// Rounds of every hold that new connections start come at most
		// once per the gate's CloseLag (a quarter period, at least 50 ms,
		// at most a period): a burst of them (a pool growing under load)
		// costs one round, not one per connection.
		all := w.dialled() && time.Since(lastPoke) >= w.timing.CloseLag()
		if all {
			lastPoke = time.Now()
		}
		w.renewDue(time.Now(), all)
		w.observe(time.Now())
		w.renewLabel(time.Now())
	}
}

// warm loads the renewal script through the renewal client as the first
// hold starts the loop, a period before the first renewal, which then
// finds a connection dialled (HELLO done) and the script loaded: cold, it
// paid a dial, NOSCRIPT and SCRIPT LOAD before its EVALSHA, and on a
// 300 ms round trip the first renewal of a 1.5 s WatchdogTimeout missed
// its deadline.
func (w *Watchdog) warm() {
	w.jobs.Add(1)
	go func() {
		defer w.jobs.Done()
		ctx, cancel := context.WithTimeout(context.Background(), w.timing.Period)
		defer cancel()
		_ = scripts.RenewBatch.Load(ctx, w.cfg.Renewal) // a renewal loads it again if this failed
	}()
}

// renewDue sends a renewal for every watchdog hold due by now (all: every
// one not in flight) without waiting for replies.
func (w *Watchdog) renewDue(now time.Time, all bool) {
	reg := w.cfg.Registry
	r := w.newRound(all)
	defer w.roundDone(r)
	due := reg.TakeDue(now, all, lua.MaxBatch, r.due[:0])
	r.due = due
	if !all {
		w.lastDue = len(due)
	}
	if len(due) == 0 {
		return
	}
	// Urgent holds (less than a period left) go first, in calls of their
	// own (the package doc).
	var urgent int
	urgent, w.scratch = holds.UrgentFirst(due, leaseclock.Nanos(now.Add(w.timing.Period)), w.scratch)
	w.order = holds.SortDue(due[urgent:], w.order)
	unit := func(u holds.Due) renew.Unit { return renew.Unit{Keys: 1 + len(u.Extra), Slot: u.Slot} }
	cluster := reg.Cluster()
	plan := func(due []holds.Due) [][][]holds.Due {
		return renew.Calls(renew.Batches(due, unit, cluster, lua.MaxBatch), unit, cluster, batchesPerCall)
	}
	var calls [][][]holds.Due
	if urgent > 0 {
		w.groups, w.order = holds.ByTimeLeft(due[:urgent], leaseclock.Nanos(now), w.groups, w.order)
		unsent(reg, due[:w.groups[0]], now)
		for i := 1; i < len(w.groups); i++ {
			calls = append(calls, plan(due[w.groups[i-1]:w.groups[i]])...)
		}
	}
	calls = append(calls, plan(due[urgent:])...)
	// Each call goes to its node's lane at once: a node whose calls take
	// all its workers holds up none of the other nodes' (lanes.go).
	ctx, cancel := w.routing()
	defer cancel()
	for _, call := range calls {
		oldest, deadline := holds.Earliest(call)
		w.dispatch(w.laneOf(ctx, call), job{call: call, r: r, oldest: oldest, deadline: deadline})
	}
}

// routing bounds the cluster slot map lookups of a round to a tick.
func (w *Watchdog) routing() (context.Context, context.CancelFunc) {
	if w.cluster == nil {
		return w.cfg.Life, func() {}
	}
	return context.WithTimeout(w.cfg.Life, w.timing.Tick)
}

// unsent reports the holds of b, taken at now, unconfirmed.
func unsent(reg *holds.Registry, b []holds.Due, now time.Time) {
	reg.ReportAll(b, func(int) holds.Renewal { return holds.Unconfirmed }, now, now, nil)
}

// A round is the holds one renewDue took, shared by its calls: refs counts
// renewDue and each call still using them.
type round struct {
	due  []holds.Due
	refs atomic.Int32
	keep bool // kept for a later round once done
}

// newRound returns a round to fill: a done one, or for a round of every
// hold (rare, as large as the registry) a new one not kept.
func (w *Watchdog) newRound(all bool) *round {
	var r *round
	if !all {
		select {
		case r = <-w.rounds:
		default:
		}
	}
	if r == nil {
		r = &round{due: make([]holds.Due, 0, w.lastDue+w.lastDue/4), keep: !all}
	}
	r.refs.Store(1)
	return r
}

// roundDone drops a reference to r; the last one keeps r for a later
// round, cleared so that it keeps no hold alive.
func (w *Watchdog) roundDone(r *round) {
	if r.refs.Add(-1) != 0 || !r.keep {
		return
	}
	clear(r.due)
	r.due = r.due[:0]
	select {
	case w.rounds <- r:
	default:
	}
}

// renewJob sends one pipeline of batches, under a ctx ending at deadline
// (the earliest of their holds'), and applies the replies; args is its
// worker's argument slices.
func (w *Watchdog) renewJob(batches [][]holds.Due, deadline time.Time, args *[][]any) {
	cfg := &w.cfg
	ctx, cancel := context.WithDeadline(cfg.Life, deadline) // Close ends it too
	defer cancel()
	sent := time.Now()
	cmds, err := w.runRenewals(ctx, batches, w.lease, args)
	used := len(batches) // the argument slices to clear
	defer func() {
		for _, b := range (*args)[:used] {
			clear(b) // they point into holds: keep none alive
		}
	}()
	cfg.Slots.Failed(err) // a dead master's replica may serve its slots by now
	if err != nil {
		batches, cmds = w.oneByOne(ctx, batches, cmds)
		err = nil // what is left of it, for the warning and the event
		for _, c := range cmds {
			if c != nil && c.Err() != nil {
				err = c.Err()
				break
			}
		}
	}

	renewed, n := 0, 0
	now := time.Now()
	for i, b := range batches {
		var res string
		if cmds != nil && cmds[i].Err() == nil {
			res, _ = cmds[i].Text() // renew_batch.lua: one byte per hold
		}
		renewed += cfg.Registry.ReportAll(b, func(j int) holds.Renewal {
			switch {
			case j >= len(res):
				return holds.Unconfirmed
			case res[j] == '1':
				return holds.Renewed
			case res[j] == '2': // held, the renewal refused (OOM)
				return holds.Unconfirmed
			}
			return holds.Gone
		}, sent, now, cfg.Gone)
		n += len(b)
	}
	if err != nil {
		cfg.Warn("watchdog renewal failed", "holds", n, "err", err)
	}
	cfg.Renewed(renewed, len(batches), now.Sub(sent), err)
}

// oneByOne sends again, each hold in a call of its own, the holds of the
// batches a half-moved slot refused (TRYAGAIN: their keys are split
// between two masters, where a call of one key is served on either side,
// by ASK), and returns the batches and replies with those in their place.
func (w *Watchdog) oneByOne(ctx context.Context, batches [][]holds.Due, cmds []*redis.Cmd) ([][]holds.Due, []*redis.Cmd) {
	var split [][]holds.Due
	var at []int // the batches split, by index
	for i, b := range batches {
		if len(b) > 1 && cmds[i] != nil && redis.HasErrorPrefix(cmds[i].Err(), "TRYAGAIN") {
			at = append(at, i)
			for j := range b {
				split = append(split, b[j:j+1])
			}
		}
	}
	if split == nil {
		return batches, cmds
	}
	var bufs [][]any
	again, _ := w.runRenewals(ctx, split, w.lease, &bufs)
	outB, outC := slices.Clone(batches), slices.Clone(cmds)
	for k := len(at) - 1; k >= 0; k-- { // from the end: indices stay valid
		i, n := at[k], len(batches[at[k]])
		from := len(split) - n
		outB = slices.Replace(outB, i, i+1, split[from:]...)
		outC = slices.Replace(outC, i, i+1, again[from:]...)
		split, again = split[:from], again[:from]
	}
	return outB, outC
}

// renewArgs are the arguments of one RenewBatch call for b (see
// renew_batch.lua), appended to buf[:0]. A hold's key and field go as
// pointers to its strings, which never change: boxing a pointer allocates
// nothing.
func renewArgs(b []holds.Due, lease any, buf []any) (args []any, numKeys int) {
	paired := false
	keys := 0
	for _, u := range b {
		paired = paired || u.H.Permit || len(u.Extra) > 0
		keys += 1 + len(u.Extra)
	}
	per := 1
	layout := ""
	if paired {
		per, layout = 2, "x"
	}
	args = slices.Grow(buf[:0], 3+keys+2+per*len(b))[:3]
	for i, u := range b {
		args = append(args, renewKey(u.H, i == 0))
		for _, k := range u.Extra {
			args = append(args, k)
		}
	}
	args = append(args, lease, layout)
	for _, u := range b {
		switch {
		case !paired:
			args = append(args, &u.H.Field)
		case u.H.Permit:
			args = append(args, &u.H.Field, -1) // a semaphore acquisition's permit ids
		default:
			args = append(args, &u.H.Field, len(u.Extra))
		}
	}
	return args, keys
}

// renewKey is the key renewing h extends (for permits the semaphore's
// timeout set, Args.Key). A call's first key is a string: go-redis routes
// by it, and reads any other type through fmt.
func renewKey(h *holds.Hold, first bool) any {
	if first || h.Permit {
		return h.Args.Key
	}
	return &h.Key
}

// runRenewals sends one RenewBatch per batch in a single pipeline. The
// batches refused with NOSCRIPT (a restarted or promoted master, SCRIPT
// FLUSH) are sent again by EVAL, which caches the script on their node: a
// SCRIPT LOAD goes to every master of a cluster, and waited on one that
// did not answer. The arguments are built in *bufs, one slice per batch,
// for the caller to clear after the replies and reuse.
func (w *Watchdog) runRenewals(ctx context.Context, batches [][]holds.Due, lease any, bufs *[][]any) ([]*redis.Cmd, error) {
	rdb := w.cfg.Renewal
	cmds := make([]*redis.Cmd, len(batches))
	for len(*bufs) < len(batches) {
		*bufs = append(*bufs, nil)
	}
	send := func(retry bool) error {
		pipe := rdb.Pipeline()
		for i, b := range batches {
			if retry && !redis.HasErrorPrefix(cmds[i].Err(), "NOSCRIPT") {
				continue
			}
			args, numKeys := renewArgs(b, lease, (*bufs)[i])
			(*bufs)[i] = args
			if retry {
				cmds[i] = scripts.RenewBatch.Eval(ctx, pipe, numKeys, args)
				continue
			}
			cmds[i] = scripts.RenewBatch.Cmd(ctx, numKeys, args)
			_ = pipe.Process(ctx, cmds[i])
		}
		_, err := pipe.Exec(ctx)
		return err
	}
	err := send(false)
	if err != nil && slices.ContainsFunc(cmds, func(c *redis.Cmd) bool { return redis.HasErrorPrefix(c.Err(), "NOSCRIPT") }) {
		err = send(true)
	}
	return cmds, err
}

// dialled reports whether the caller's client dialled since the last call:
// after a restart or a failover every hold is checked at once, as a server
// restarted without persistence forgot them. It polls the pool's misses
// (one per dial) and stale conns: a hook cannot be removed, and AddHook
// races with a client in use.
func (w *Watchdog) dialled() bool {
	st := w.cfg.Caller.PoolStats()
	if st == nil {
		return false
	}
	n := uint64(st.Misses) + uint64(st.StaleConns)
	seen := w.dials != n
	w.dials = n
	return seen
}
