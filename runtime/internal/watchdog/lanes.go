package watchdog

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime/internal/holds"
	"github.com/lockgen/lockgen/runtime/internal/leaseclock"
)

// A lane is the renewal calls of one node (one server, or one master of
// a cluster): at most Workers in flight, the others queued in the order
// the rounds sent them, each taken by the first worker of the lane to
// finish. A node that does not answer fills its own lane only: the round
// never waits for a worker, so the other nodes' calls go out at once.
type lane struct {
	mu sync.Mutex
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

func newLane() *lane {
	l := &lane{free: make(chan int, Workers)}
	for i := range Workers {
		l.free <- i
	}
	return l
}

// laneOf is the lane of the node that serves call: the one lane on one
// server; on a cluster its slot's master, as the renewal client's slot
// map has it (ctx bounds loading the map, which the client has unless it
// never reached the cluster; then the calls share the lane "").
func (w *Watchdog) laneOf(ctx context.Context, call [][]holds.Due) *lane {
	if w.cluster == nil {
		return w.one
	}
	addr := ""
	if n, err := w.cluster.MasterForKey(ctx, call[0][0].H.Key); err == nil {
		addr = n.Options().Addr
	}
	l := w.lanes[addr]
	if l == nil {
		w.dropIdle() // a new master (a failover, a restart): forget the idle ones
		l = newLane()
		w.lanes[addr] = l
	}
	return l
}

// dropIdle forgets the lanes with nothing in flight or queued; a node
// still in use gets a new one at its next call.
func (w *Watchdog) dropIdle() {
	for addr, l := range w.lanes {
		l.mu.Lock()
		idle := len(l.free) == Workers && len(l.queue) == 0
		l.mu.Unlock()
		if idle {
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
		w.run(j, &l.args[slot])
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

// run sends j's call with args; a call dequeued after the Client closed
// or out of time is not sent, its holds reported unconfirmed.
func (w *Watchdog) run(j job, args *[][]any) {
	defer w.roundDone(j.r)
	if now := time.Now(); w.closed() || !now.Before(j.deadline) {
		for _, b := range j.call {
			unsent(w.cfg.Registry, b, now)
		}
	} else {
		w.renewJob(j.call, j.deadline, args)
	}
	w.replied(time.Now(), j.oldest)
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

// Overload (design.md §6): the backlog the admission gate is told at each
// tick is the largest of the age of the oldest due renewal of a call in
// flight (a lane's busy), how late the replies since the last tick came
// after their holds were due (late), and the age of the oldest hold of a
// call queued for a worker of its node (a lane's queue).

// replied records that a call whose oldest hold was due at oldest got its
// replies (or gave up) at now.
func (w *Watchdog) replied(now time.Time, oldest int64) {
	late := leaseclock.Nanos(now) - oldest
	for {
		cur := w.late.Load()
		if late <= cur || w.late.CompareAndSwap(cur, late) {
			return
		}
	}
}

// observe tells the gate the backlog at now.
func (w *Watchdog) observe(now time.Time) {
	backlog := time.Duration(w.late.Swap(0))
	behind := func(l *lane) {
		for i := range l.busy {
			if at := l.busy[i].Load(); at != 0 {
				backlog = max(backlog, time.Duration(leaseclock.Nanos(now)-at))
			}
		}
		if at := l.pending(); at != 0 {
			backlog = max(backlog, time.Duration(leaseclock.Nanos(now)-at))
		}
	}
	behind(w.one)
	for _, l := range w.lanes {
		behind(l)
	}
	if !w.gate.Observe(backlog) {
		return
	}
	if w.gate.Closed() {
		w.cfg.Warn("watchdog renewals run behind: new acquisitions wait", "backlog", backlog.Round(time.Millisecond))
		return
	}
	w.cfg.Log.Debug("watchdog renewals caught up: new acquisitions go on", "backlog", backlog.Round(time.Millisecond))
}

// Stall, for tests, takes a worker slot of the lane of one server and
// marks its call due long ago until release, as if Redis had not
// answered: the next tick closes the gate.
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
