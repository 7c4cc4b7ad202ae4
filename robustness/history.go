package robustness

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sync"

	"golang.org/x/sys/unix"
)

// Now is CLOCK_MONOTONIC in nanoseconds: one clock for every process on
// the machine, which is what lets the checkers compare the events of
// several processes (Go's own monotonic readings start at each process's
// start).
func Now() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// Never is the time of something that did not happen (an operation that
// never returned: its process was killed, or the run ended first).
const Never int64 = math.MaxInt64

// Event is one line of a process's history file, written as it happens
// (a write to the file per event, so a SIGKILL loses nothing written).
type Event struct {
	T    int64  `json:"t"`              // Now() when it happened
	Proc int    `json:"p"`              // the worker process (its index, new on a restart); -1: the nemesis
	Op   int64  `json:"op"`             // the operation, unique within Proc
	Ev   string `json:"ev"`             // one of the Ev* constants
	Kind string `json:"kind,omitempty"` // the lock kind (Kind* constants); the fault type for fault events
	F    string `json:"f,omitempty"`    // the function (F* constants)
	Key  string `json:"key,omitempty"`  // the lock's key; for a fault, its target
	// Keys are the member keys of a multi-lock (a hold of each).
	Keys []string `json:"keys,omitempty"`
	// N is the operation's number: permits asked for or released, a
	// latch count set or read, a fencing token, the value a guarded write
	// read (EvWrote: the value it read; the write wrote N+1).
	N int64 `json:"n,omitempty"`
	// Wait is an acquire's wait time in ns (-1: until ctx is done), Lease
	// its lease in ns (0: watchdog).
	Wait  int64 `json:"wait,omitempty"`
	Lease int64 `json:"lease,omitempty"`
	// Outcome is for EvReturn: OutOK, OutFail (a definite failure: not
	// acquired, refused) or OutUnknown (the call failed without telling
	// whether it took effect).
	Outcome string `json:"out,omitempty"`
	Err     string `json:"err,omitempty"` // the error, for returns; the cause, for EvDone
	Client  int    `json:"c,omitempty"`   // the goroutine's Client generation (Close makes a new one)
	G       int    `json:"g,omitempty"`   // the goroutine
	// Shared names the Client when several goroutines of the process
	// share it ("p<proc>-g<its first goroutine>"; empty: the goroutine's
	// own). A Close by any of them ends the holds of all.
	Shared string `json:"sh,omitempty"`
	Nested bool   `json:"nested,omitempty"`
}

// Event types.
const (
	EvInvoke   = "invoke"   // an operation starts
	EvReturn   = "return"   // it returned (Outcome says how)
	EvDone     = "done"     // a hold's ctx was done (Err: its cause); Op is the acquire
	EvRelease  = "release"  // a hold's release was invoked; Op is the acquire
	EvReleased = "released" // the release returned (Outcome, Err); Op is the acquire
	EvWrite    = "write"    // a guarded write is invoked; Op is the acquire
	EvWrote    = "wrote"    // it returned (N: the value read; Outcome: ok, or fail when the storage refused a stale token)
	EvStart    = "start"    // a fault starts (Kind: its type, Key: its target)
	EvEnd      = "end"      // a fault ends (healed)
	EvProcess  = "process"  // a worker process started (F: its role)
	EvExit     = "exit"     // a worker process ended (Outcome: ok, or fail with Err)
)

// Outcomes.
const (
	OutOK      = "ok"
	OutFail    = "fail"
	OutUnknown = "unknown"
)

// Lock kinds.
const (
	KindReentrant   = "reentrant"
	KindFair        = "fair"
	KindRead        = "read"
	KindWrite       = "write"
	KindMultiAtomic = "multi-atomic"
	KindMulti       = "multi"
	KindRed         = "red"
	KindFenced      = "fenced"
	KindSemaphore   = "semaphore"
	KindPlain       = "plain-semaphore"
	KindLatch       = "latch"
)

// Functions.
const (
	FAcquire   = "acquire"    // TryLock / TryAcquire / TryLockFenced (N: permits or token)
	FRelease   = "release"    // a plain semaphore's Release(N)
	FAvailable = "available"  // a semaphore's free count read (N)
	FSetCount  = "set-count"  // a latch's TrySetCount(N): ok when it set it, fail when the latch was armed
	FCountDown = "count-down" // a latch's CountDown
	FCount     = "count"      // a latch's Count (N)
	FAwait     = "await"      // a latch's TryAwait
	FClose     = "close"      // a Client's Close
	FShutdown  = "shutdown"   // a Client's Shutdown, its ctx ending within 50 ms (then it cuts the holds left)
	FSweep     = "sweep"      // the final liveness acquire of a key (an acquire)
)

// Recorder writes one process's events to its history file. It is safe for
// concurrent use.
type Recorder struct {
	mu   sync.Mutex
	f    *os.File
	proc int
	seq  int64
	buf  []byte
}

// NewRecorder appends the events of process proc to the file at path.
func NewRecorder(path string, proc int) (*Recorder, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &Recorder{f: f, proc: proc}, nil
}

// NextOp returns a new operation id.
func (r *Recorder) NextOp() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq++
	return r.seq
}

// Record stamps e with the time (unless set), the process, and writes it.
func (r *Recorder) Record(e Event) {
	if e.T == 0 {
		e.T = Now()
	}
	e.Proc = r.proc
	r.mu.Lock()
	defer r.mu.Unlock()
	b, err := json.Marshal(e)
	if err != nil {
		panic(err) // an Event always marshals
	}
	r.buf = append(append(r.buf[:0], b...), '\n')
	_, _ = r.f.Write(r.buf)
}

// Close closes the file.
func (r *Recorder) Close() error { return r.f.Close() }

// ReadEvents reads a history file. A torn last line (the writer was
// killed mid-write) is dropped.
func ReadEvents(rd io.Reader) ([]Event, error) {
	var out []Event
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			continue
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

// Op is one operation put together from its events.
type Op struct {
	Proc   int      `json:"proc"`
	ID     int64    `json:"id"`
	G      int      `json:"g"`
	Client int      `json:"client"`
	Shared string   `json:"shared,omitempty"` // the Client's name when goroutines share it (Event.Shared)
	Kind   string   `json:"kind"`
	F      string   `json:"f"`
	Key    string   `json:"key"`
	Keys   []string `json:"keys,omitempty"`
	Nested bool     `json:"nested,omitempty"`
	N      int64    `json:"n"`     // asked for (invoke), or learnt (return: a token, a count)
	Wait   int64    `json:"wait"`  // ns; -1 forever
	Lease  int64    `json:"lease"` // ns; 0 watchdog

	Invoke  int64  `json:"invoke"`
	Return  int64  `json:"return"` // Never when it never returned
	Outcome string `json:"outcome"`
	Err     string `json:"err,omitempty"`

	// For acquisitions that succeeded: the hold.
	Done          int64   `json:"done"` // the hold's ctx was done; Never if not seen
	Cause         string  `json:"cause,omitempty"`
	ReleaseInvoke int64   `json:"releaseInvoke"` // Never if not released
	ReleaseReturn int64   `json:"releaseReturn"`
	ReleaseErr    string  `json:"releaseErr,omitempty"`
	Writes        []Write `json:"writes,omitempty"`
}

// Write is a guarded write done under a hold: a read-modify-write of the
// key's counter in the storage server, or for a fenced lock a write of
// its token to the fenced register.
type Write struct {
	Invoke  int64  `json:"invoke"`
	Return  int64  `json:"return"`        // Never when it never returned
	Read    int64  `json:"read"`          // the value read (the write wrote Read+1); the token, for a fenced write
	Outcome string `json:"outcome"`       // ok; fail: refused (stale token); unknown
	Err     string `json:"err,omitempty"` //
}

// Holds reports whether o is an acquisition that took the lock.
func (o *Op) Holds() bool {
	return (o.F == FAcquire || o.F == FSweep) && o.Outcome == OutOK
}

// End is when the hold stopped counting as held by its owner: its ctx
// done, its release invoked, or its process gone, whichever came first
// (exit: when the process ended, Never if it did not).
func (o *Op) End(exit int64) int64 {
	return min(o.Done, o.ReleaseInvoke, exit)
}

// Fault is one injected fault.
type Fault struct {
	ID     int64  `json:"id"`
	Type   string `json:"type"`
	Target string `json:"target,omitempty"` // a process ("p3"), a server ("lock", "red1"), or "all"
	Start  int64  `json:"start"`
	End    int64  `json:"end"` // Never if it did not heal (a run cut short)
}

// Process is one worker process's life.
type Process struct {
	Proc  int    `json:"proc"`
	Start int64  `json:"start"`
	Exit  int64  `json:"exit"`          // Never if it did not exit
	Err   string `json:"err,omitempty"` // why it failed, if it did
}

// History is a whole run: every operation of every process, and every
// fault of the nemesis.
type History struct {
	Seed      int64     `json:"seed"`
	Ops       []*Op     `json:"ops"`
	Faults    []Fault   `json:"faults"`
	Processes []Process `json:"processes"`
	// Begin and Finish bound the run; Healed is when the last fault ended.
	Begin  int64 `json:"begin"`
	Finish int64 `json:"finish"`
	Healed int64 `json:"healed"`
}

// Build puts a History together from the events of every process and the
// nemesis.
func Build(seed int64, events []Event) *History {
	h := &History{Seed: seed, Begin: Never}
	type opKey struct {
		proc int
		op   int64
	}
	ops := map[opKey]*Op{}
	faults := map[int64]*Fault{}
	procs := map[int]*Process{}
	slices.SortStableFunc(events, func(a, b Event) int { return cmp.Compare(a.T, b.T) })
	for _, e := range events {
		h.Begin = min(h.Begin, e.T)
		h.Finish = max(h.Finish, e.T)
		k := opKey{e.Proc, e.Op}
		switch e.Ev {
		case EvInvoke:
			ops[k] = &Op{Proc: e.Proc, ID: e.Op, G: e.G, Client: e.Client, Shared: e.Shared, Kind: e.Kind, F: e.F, Key: e.Key,
				Keys: e.Keys, Nested: e.Nested, N: e.N, Wait: e.Wait, Lease: e.Lease, Invoke: e.T,
				Return: Never, Outcome: OutUnknown, Done: Never, ReleaseInvoke: Never, ReleaseReturn: Never}
		case EvReturn:
			if o := ops[k]; o != nil {
				o.Return, o.Outcome, o.Err = e.T, e.Outcome, e.Err
				if e.N != 0 {
					o.N = e.N
				}
			}
		case EvDone:
			if o := ops[k]; o != nil && o.Done == Never {
				o.Done, o.Cause = e.T, e.Err
			}
		case EvRelease:
			if o := ops[k]; o != nil && o.ReleaseInvoke == Never {
				o.ReleaseInvoke = e.T
			}
		case EvReleased:
			if o := ops[k]; o != nil {
				o.ReleaseReturn, o.ReleaseErr = e.T, e.Err
			}
		case EvWrite:
			if o := ops[k]; o != nil {
				o.Writes = append(o.Writes, Write{Invoke: e.T, Return: Never, Read: e.N, Outcome: OutUnknown})
			}
		case EvWrote:
			if o := ops[k]; o != nil && len(o.Writes) > 0 {
				w := &o.Writes[len(o.Writes)-1]
				w.Return, w.Read, w.Outcome, w.Err = e.T, e.N, e.Outcome, e.Err
			}
		case EvStart:
			faults[e.Op] = &Fault{ID: e.Op, Type: e.Kind, Target: e.Key, Start: e.T, End: Never}
		case EvEnd:
			if f := faults[e.Op]; f != nil {
				f.End = e.T
			}
		case EvProcess:
			procs[e.Proc] = &Process{Proc: e.Proc, Start: e.T, Exit: Never}
		case EvExit:
			if p := procs[e.Proc]; p != nil {
				p.Exit, p.Err = e.T, e.Err
			}
		}
	}
	for _, o := range ops {
		h.Ops = append(h.Ops, o)
	}
	slices.SortFunc(h.Ops, func(a, b *Op) int {
		return cmp.Or(cmp.Compare(a.Invoke, b.Invoke), cmp.Compare(a.Proc, b.Proc), cmp.Compare(a.ID, b.ID))
	})
	for _, f := range faults {
		h.Faults = append(h.Faults, *f)
		if f.End != Never {
			h.Healed = max(h.Healed, f.End)
		}
	}
	slices.SortFunc(h.Faults, func(a, b Fault) int { return cmp.Compare(a.Start, b.Start) })
	for _, p := range procs {
		h.Processes = append(h.Processes, *p)
	}
	slices.SortFunc(h.Processes, func(a, b Process) int { return cmp.Compare(a.Proc, b.Proc) })
	return h
}

// Exit is when process proc ended (Never if it did not).
func (h *History) Exit(proc int) int64 {
	for _, p := range h.Processes {
		if p.Proc == proc {
			return p.Exit
		}
	}
	return Never
}

// FaultsOn returns the faults of type typ (any type: "") on target.
func (h *History) FaultsOn(typ, target string) []Fault {
	var out []Fault
	for _, f := range h.Faults {
		if (typ == "" || f.Type == typ) && (target == "" || f.Target == target || f.Target == "all") {
			out = append(out, f)
		}
	}
	return out
}

// ProcTarget is the fault target naming worker process proc.
func ProcTarget(proc int) string { return fmt.Sprintf("p%d", proc) }

// Fault types (Fault.Type). Targets: a worker process ("p3") or every one
// ("all") for the network and process faults, a server ("lock", "red0",
// "red1", "red2") for the server faults.
const (
	FaultBlackhole     = "blackhole"      // packets dropped both ways, connections left open
	FaultBlackholeUp   = "blackhole-up"   // client→server packets dropped
	FaultBlackholeDown = "blackhole-down" // server→client packets dropped
	FaultReset         = "reset"          // every connection reset (instant)
	FaultLatency       = "latency"        // replies delayed
	FaultPauseProcess  = "pause-process"  // SIGSTOP … SIGCONT of a worker process
	FaultKillProcess   = "kill-process"   // SIGKILL of a worker process (instant; a new one takes its place)
	FaultClientPause   = "client-pause"   // CLIENT PAUSE WRITE
	FaultKillPubSub    = "kill-pubsub"    // CLIENT KILL of the pub/sub and tracking connections (instant)
	FaultPauseServer   = "pause-server"   // SIGSTOP … SIGCONT of redis-server
	FaultRestart       = "restart"        // redis-server killed and started again from its append-only file
	FaultFlush         = "flushall"       // FLUSHALL: every lock forgotten (data loss)
	FaultMigrate       = "migrate-slot"   // a lock's cluster slot moved to another master, keys and TTLs with it
	// FaultStall is not injected: a worker records it when it did not run
	// for longer than StallLimit (the OS gave its CPU to others, its own
	// runtime stopped it), which holds it as a SIGSTOP would.
	FaultStall = "stall"
)

// LosesData reports whether a fault of type typ makes Redis forget what it
// held: after it, another owner can take a lock its holder still counts on
// until that holder's next renewal (or, for a fixed lease, its end). That
// is a documented limit, and the checkers bound it rather than forgive it.
func LosesData(typ string) bool { return typ == FaultFlush }
