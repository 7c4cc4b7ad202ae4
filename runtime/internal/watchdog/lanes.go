package watchdog

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime/internal/holds"
	"github.com/lockgen/lockgen/runtime/internal/leaseclock"
	"github.com/lockgen/lockgen/runtime/internal/renew"
)

// A lane is the renewal calls of one node (one server, or one master of
// a cluster): at most Workers in flight, the others queued in the order
// the rounds sent them, each taken by the first worker of the lane to
// finish. A node that does not answer fills its own lane only: the round
// never waits for a worker, so the other nodes' calls go out at once.
type lane struct {
	addr string           // its node's address ("" on a cluster: unknown)
	gate *renew.Admission // its node's admission gate, fed by its backlog
	late atomic.Int64     // how late its replies came since the last tick
	mu   sync.Mutex
	// free holds the free worker slots, taken and given back under mu
	// (but by Stall), so that no call is queued while a slot is free.
	free  chan int
	queue []job // under mu
	// busy[i] is the oldest due time (leaseclock.Nanos) of worker slot
	// i's call, 0 while free; args[i] its call's arguments, reused.
	busy [Workers]atomic.Int64
	args [Workers][][]any
}

// A job is one call of a round, waiting in its lane or in flight.
type job struct {
	call     [][]holds.Due
	r        *round
	oldest   int64     // when its oldest hold was due
	deadline time.Time // the earliest of its holds'
}

func newLane(addr string, t renew.Timing) *lane {
	l := &lane{addr: addr, gate: renew.NewAdmission(t), free: make(chan int, Workers)}
	for i := range Workers {
		l.free <- i
	}
	return l
}

// laneOf is the lane of the node that serves call: the one lane on one
// server; on a cluster its slot's master (masterOf). Only the loop adds
// or drops lanes, under mu.
func (w *Watchdog) laneOf(ctx context.Context, call [][]holds.Due) *lane {
	if w.cluster == nil {
		return w.one
	}
	addr := w.masterOf(ctx, call[0][0].H.Key)
	l := w.lanes[addr]
	if l == nil {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.dropIdle() // a new master (a failover, a restart): forget the idle ones
		l = newLane(addr, w.timing)
		w.lanes[addr] = l
	}
	return l
}

// masterOf is the address of key's master as the renewal client's slot
// map has it (ctx bounds loading the map, which the client has unless it
// never reached the cluster; then "", a lane shared by such calls).
func (w *Watchdog) masterOf(ctx context.Context, key string) string {
	if n, err := w.cluster.MasterForKey(ctx, key); err == nil {
		return n.Options().Addr
	}
	return ""
}

// Gate is the admission gate of the node that serves key (nil: open):
// the one gate on one server; on a cluster the gate of the lane of key's
// master, looked up only while some gate is closed (a node with no lane
// has an open gate).
func (w *Watchdog) Gate(key string) *renew.Admission {
	if w.cluster == nil {
		return w.one.gate
	}
	if !w.GateClosed() {
		return nil
	}
	ctx, cancel := w.routing()
	defer cancel()
	addr := w.masterOf(ctx, key)
	w.mu.Lock()
	defer w.mu.Unlock()
	if l := w.lanes[addr]; l != nil {
		return l.gate
	}
	return nil
}

// GateClosed reports whether some node's gate was closed at the last tick.
func (w *Watchdog) GateClosed() bool { return w.shut.Load() > 0 }

// dropIdle forgets the lanes with nothing in flight or queued, opening
// their gates (for the acquisitions waiting in them); a node still in use
// gets a new one at its next call. w.mu is held.
func (w *Watchdog) dropIdle() {
	for addr, l := range w.lanes {
		l.mu.Lock()
		idle := len(l.free) == Workers && len(l.queue) == 0
		l.mu.Unlock()
		if idle {
			l.gate.Observe(0)
			delete(w.lanes, addr)
		}
	}
}

// dispatch starts j on a free worker of l, or queues it there.
func (w *Watchdog) dispatch(l *lane, j job) {
	j.r.refs.Add(1)
	l.mu.Lock()
	var slot int
	select {
	case slot = <-l.free:
	default:
		l.queue = append(l.queue, j)
		l.mu.Unlock()
		return
	}
	l.busy[slot].Store(j.oldest)
	l.mu.Unlock()
	w.jobs.Add(1)
	go w.work(l, slot, j)
}

// work runs j on worker slot of l, then the lane's queued calls, until
// none is left.
func (w *Watchdog) work(l *lane, slot int, j job) {
	defer w.jobs.Done()
	for ok := true; ok; j, ok = l.next(slot) {
		w.run(l, j, &l.args[slot])
	}
}

// next hands worker slot to the lane's oldest queued call, or frees it
// (false: none queued).
func (l *lane) next(slot int) (job, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.queue) == 0 {
		l.busy[slot].Store(0)
		l.free <- slot // never blocks: the slot came from it
		return job{}, false
	}
	j := l.queue[0]
	l.queue[0] = job{} // keeps no hold alive
	l.queue = l.queue[1:]
	l.busy[slot].Store(j.oldest)
	return j, true
}

// run sends j's call of lane l with args; a call dequeued after the
// Client closed or out of time is not sent, its holds reported
// unconfirmed.
func (w *Watchdog) run(l *lane, j job, args *[][]any) {
	defer w.roundDone(j.r)
	if now := time.Now(); w.closed() || !now.Before(j.deadline) {
		for _, b := range j.call {
			unsent(w.cfg.Registry, b, now)
		}
	} else {
		w.renewJob(j.call, j.deadline, args)
	}
	l.replied(time.Now(), j.oldest)
}

func (w *Watchdog) closed() bool {
	select {
	case <-w.cfg.Closed:
		return true
	default:
		return false
	}
}

// pending is the oldest due time of the calls queued in l (0: none).
func (l *lane) pending() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var oldest int64
	for _, j := range l.queue {
		if oldest == 0 || j.oldest < oldest {
			oldest = j.oldest
		}
	}
	return oldest
}

// clusterOf is rdb as a cluster client, or nil.
func clusterOf(rdb redis.UniversalClient) *redis.ClusterClient {
	cc, _ := rdb.(*redis.ClusterClient)
	return cc
}

// addrOf names the node of a client of one server in logs ("": not one).
func addrOf(rdb redis.UniversalClient) string {
	if c, ok := rdb.(*redis.Client); ok {
		return c.Options().Addr
	}
	return ""
}

// Overload (design.md §6): each lane has its own admission gate, told at
// each tick the lane's backlog: the largest of the age of the oldest due
// renewal of its calls in flight (busy), how late its replies since the
// last tick came after their holds were due (late), and the age of the
// oldest hold of its queued calls. A node that does not answer closes
// only its own gate: the other nodes' acquisitions go on.

// replied records that a call of l whose oldest hold was due at oldest
// got its replies (or gave up) at now.
func (l *lane) replied(now time.Time, oldest int64) {
	late := leaseclock.Nanos(now) - oldest
	for {
		cur := l.late.Load()
		if late <= cur || l.late.CompareAndSwap(cur, late) {
			return
		}
	}
}

// backlog is how far l runs behind at now; it takes late.
func (l *lane) backlog(now time.Time) time.Duration {
	backlog := time.Duration(l.late.Swap(0))
	for i := range l.busy {
		if at := l.busy[i].Load(); at != 0 {
			backlog = max(backlog, time.Duration(leaseclock.Nanos(now)-at))
		}
	}
	if at := l.pending(); at != 0 {
		backlog = max(backlog, time.Duration(leaseclock.Nanos(now)-at))
	}
	return backlog
}

// observe tells each lane's gate the lane's backlog at now.
func (w *Watchdog) observe(now time.Time) {
	var shut int32
	tell := func(l *lane) {
		backlog := l.backlog(now)
		switch changed := l.gate.Observe(backlog); {
		case changed && l.gate.Closed():
			w.cfg.Warn("watchdog renewals to a node run behind: new acquisitions there wait", "node", l.addr, "backlog", backlog.Round(time.Millisecond))
		case changed:
			w.cfg.Log.Debug("watchdog renewals to a node caught up: new acquisitions there go on", "node", l.addr, "backlog", backlog.Round(time.Millisecond))
		}
		if l.gate.Closed() {
			shut++
		}
	}
	tell(w.one)
	for _, l := range w.lanes {
		tell(l)
	}
	w.shut.Store(shut)
}

// Stall, for tests, takes a worker slot of the lane of one server and
// marks its call due long ago until release, as if Redis had not
// answered: the next tick closes its gate.
func (w *Watchdog) Stall() (release func()) {
	l := w.one
	slot := <-l.free
	l.busy[slot].Store(leaseclock.Nanos(time.Now().Add(-2 * w.timing.CloseLag())))
	return func() {
		if j, ok := l.next(slot); ok { // a call queued meanwhile
			w.jobs.Add(1)
			go w.work(l, slot, j)
		}
	}
}
