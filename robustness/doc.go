// Package robustness searches for bugs where lockgen's mechanisms meet,
// by itself: random operations over every lock kind from several OS
// processes, random overlapping faults, every event recorded, and
// checkers that know only the promises.
//
// It is run as a test (go test ./robustness/...; docs/robustness.md says
// how to run it longer and how to rerun a seed). One run:
//
//   - Servers: a lock server with an append-only file (fsync always, so a
//     restart keeps what it acknowledged), three independent RedLock
//     nodes, and a storage server no fault touches, which holds the state
//     the locks guard.
//   - Workload (workload.go): Procs worker processes (the test binary
//     run again) with Goroutines goroutines each, draw operations from
//     the seed over every kind (in most processes some goroutines share
//     one runtime.Client, as a service's do, and the others have their
//     own: Config.Sharing): reentrant (with re-entry), fair, read and
//     write (writers first), multi (atomic, and one by one with a fair
//     member), red (over the three nodes), fenced, semaphore (leased
//     permits), plain semaphore and latch; random wait times and leases,
//     cancelled waits, a ctx cancelled while holding, a Client closed
//     while holding (a shared one ends every sharer's holds). A holder
//     of an exclusive lock does a read-modify-write of a counter in the
//     storage (two round trips: two holders at once would both read the
//     same value); a fenced holder writes its token to a register that
//     refuses a token lower than the last it accepted, without looking
//     at its ctx first.
//   - Nemesis (nemesis.go, run.go): a schedule drawn from the seed (Plan)
//     of the faults of design.md §7, overlapping where they strike
//     different things: packets dropped one or both ways, connections
//     reset, latency (a fault proxy per worker and server), a worker
//     process paused (SIGSTOP) or killed (SIGKILL; a new one takes its
//     place), CLIENT PAUSE WRITE, the pub/sub and tracking connections
//     killed, redis-server paused or restarted from its append-only file,
//     FLUSHALL. Every fault heals before the workload ends.
//   - History (history.go): every process writes each event as it
//     happens, stamped with CLOCK_MONOTONIC (one clock for every process
//     on the machine): invoke and return of each operation, the moment a
//     hold's ctx was done and why, release invoke and return, each guarded
//     write, and the faults' start and end.
//   - After the workload every worker takes each lock once more (the
//     sweep, the liveness probe), closes its Clients and exits; once the
//     leases of killed holders ran out, the lock server is inspected.
//   - Checkers (check_*.go) judge the merged history: exclusion, lost
//     updates, fencing, linearizability (porcupine) of the latch, the plain
//     semaphore and the fenced register, liveness, and hygiene.
//
// With Config.Cluster the lock server is a local Redis Cluster whose
// slots migrate between masters while the workers use them, some halting
// half moved (ClusterFaults; docs/robustness.md).
//
// A failure prints the seed (a rerun with LOCKGEN_ROBUSTNESS_SEED draws
// the same fault schedule and the same operations; their timing differs),
// the window of the history around each violation, and leaves the whole
// history as JSON, with porcupine's visualization of a non-linearizable
// key, in a folder it names.
package robustness
