package lockenv

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime/internal/await"
	"github.com/lockgen/lockgen/runtime/internal/calls"
	"github.com/lockgen/lockgen/runtime/internal/holds"
	"github.com/lockgen/lockgen/runtime/internal/hub"
	"github.com/lockgen/lockgen/runtime/internal/scripts"
	"github.com/lockgen/lockgen/runtime/internal/settle"
)

// Watchdog is the lease of a hold the watchdog renews (runtime.Watchdog).
const Watchdog time.Duration = 0

// MinLease is the shortest lease accepted (holds.MinLease): anything
// shorter expires before a round trip and its drift margin.
const MinLease = holds.MinLease

// PermitOwnerLen is how many bytes of a lockgen permit id are the start
// of its Client's uuid (runtime.PermitOwnerLen).
const PermitOwnerLen = 8

// Env is what a Client's locks work through, shared by all its handles.
type Env struct {
	RDB redis.UniversalClient // the caller's client: tries and releases
	// Renewal is the client that honours ctx deadlines (RDB, or
	// watchdog.DeadlineClient): background settlements go through it.
	Renewal redis.UniversalClient
	Reg     *holds.Registry // holds, turns and unknown outcomes
	Hub     *hub.Hub        // where waiters sleep, and hand-offs
	Waits   await.Loop      // the wait loop every kind waits in
	Calls   calls.Limits    // bounds releases and settlements
	Settler *settle.Settler // background settlements
	// Acquiring counts the acquisitions under way (every Acquire of the
	// engines): Shutdown waits for those it drained, since what they
	// leave to settle (a fair queue's leave) comes after their wait.
	Acquiring atomic.Int64
	// Resolving counts the abandoned calls whose outcome has not been
	// taken over yet (Then), and a RedLock's tries left running by their
	// round: Shutdown waits for those too, since what a late reply took
	// is given back only once it comes.
	Resolving atomic.Int64

	ID string // the Client's uuid: the first half of every owner token
	// IDPrefix is the uuid's first bytes, raw: they start the Client's
	// permit ids (package semaphore).
	IDPrefix  [PermitOwnerLen]byte
	IDArg     any  // ID, boxed once as a script argument
	Publish   any  // "publish" or "spublish", boxed once
	MarkerTTL any  // lifetime of request markers in ms, boxed once
	Cluster   bool // keys are grouped by slot
	Sharded   bool // sharded pub/sub

	Watchdog  time.Duration // Options.WatchdogTimeout
	Replicas  time.Duration // Options.ReplicaTimeout
	NoHandoff bool          // Options.NoHandoff
	Log       *slog.Logger

	// Fail makes the error of a failed operation op on a lock (name,
	// key), caused by err: runtime's *LockError. Inside an engine causes
	// stay unwrapped, but those handed to the registry (a loss, the end of
	// a fixed lease).
	Fail func(op, name, key string, err error) error
	// WaitStarted reports that an acquisition starts waiting (the
	// observer's EventWaitStarted); nil without an observer.
	WaitStarted func(ctx context.Context, name, key, lock string, wait time.Duration)

	wdLease    any // Watchdog in ms, boxed once
	ownerSeq   atomic.Uint64
	requestSeq atomic.Uint64
	warnMu     sync.Mutex
	warned     map[string]warned
}

// Init prepares e's own state once its fields are set.
func (e *Env) Init() { e.wdLease = strconv.FormatInt(e.Watchdog.Milliseconds(), 10) }

// NewOwner returns a new owner token "<client uuid>:<n>", Redisson's
// "<uuid>:<thread id>" with a ctx chain in place of the thread.
func (e *Env) NewOwner() string { return e.newID(":", e.ownerSeq.Add(1), 10) }

// NewRequestID returns an id unique to one acquire attempt.
func (e *Env) NewRequestID() string { return e.newID(":r", e.requestSeq.Add(1), 36) }

func (e *Env) newID(sep string, n uint64, base int) string {
	var b [64]byte
	return string(strconv.AppendUint(append(append(b[:0], e.ID...), sep...), n, base))
}

// LeaseArg is lease in milliseconds as a script argument.
func (e *Env) LeaseArg(lease time.Duration) any {
	if lease == e.Watchdog {
		return e.wdLease
	}
	return strconv.FormatInt(lease.Milliseconds(), 10)
}

// logInterval is the least time between two warnings of one kind (its
// message), which come in bursts when Redis is down (one per hold or call).
const logInterval = 10 * time.Second

type warned struct {
	at      time.Time
	dropped int // left out since at
}

// Warn writes a warning, rate-limited by kind (see logInterval): its
// message, and its "node" when it names one (a cluster's masters fail
// one at a time); the next one written counts those left out.
func (e *Env) Warn(msg string, args ...any) {
	kind := msg
	for i := 0; i+1 < len(args); i += 2 {
		if args[i] == "node" {
			kind = fmt.Sprint(msg, "\x00", args[i+1])
		}
	}
	now := time.Now()
	e.warnMu.Lock()
	prev, seen := e.warned[kind]
	if seen && now.Sub(prev.at) < logInterval {
		prev.dropped++
		e.warned[kind] = prev
		e.warnMu.Unlock()
		return
	}
	if e.warned == nil {
		e.warned = make(map[string]warned)
	}
	e.warned[kind] = warned{at: now}
	e.warnMu.Unlock()
	if prev.dropped > 0 {
		args = append(args, "more since the last such warning", prev.dropped)
	}
	e.Log.Warn(msg, args...)
}

// Then runs f with the outcome of the abandoned call p once it comes
// (scripts.Pending.Then), counted in Resolving until f has run, so that
// Shutdown waits for what f queues.
func (e *Env) Then(p *scripts.Pending, f func(cmd *redis.Cmd)) {
	e.Resolving.Add(1)
	p.Then(func(cmd *redis.Cmd) {
		defer e.Resolving.Add(-1)
		f(cmd)
	})
}
