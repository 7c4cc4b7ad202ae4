package robustness

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// PlannedFault is one fault of a schedule: what, where, when (from the
// start of the workload) and for how long (0: instant).
type PlannedFault struct {
	Type   string
	Slot   int // the worker slot for process and network faults; -1: every slot
	Server string
	At     time.Duration
	For    time.Duration
	Pick   int // migrate-slot: chooses the key and the master it goes to
}

func (f PlannedFault) String() string {
	where := f.Server
	if where == "" {
		where = "all workers"
		if f.Slot >= 0 {
			where = fmt.Sprintf("worker slot %d", f.Slot)
		}
	}
	return fmt.Sprintf("%v+%v %s on %s", f.At.Round(time.Millisecond), f.For.Round(time.Millisecond), f.Type, where)
}

// DefaultFaults are the fault types of design.md §7 a schedule draws
// from on one lock server and three RedLock nodes.
var DefaultFaults = []string{
	FaultBlackhole, FaultBlackholeUp, FaultBlackholeDown, FaultReset, FaultLatency,
	FaultPauseProcess, FaultKillProcess, FaultClientPause, FaultKillPubSub,
	FaultPauseServer, FaultRestart, FaultFlush,
}

// ClusterFaults are those drawn from when the lock server is a Redis
// Cluster: a slot migration instead of pausing or restarting it (a master
// down past the node timeout is failed over, and asynchronous replication
// may lose a lock: no lock service keeps exclusion then). Pausing and
// restarting still strike the RedLock nodes.
var ClusterFaults = []string{
	FaultBlackhole, FaultBlackholeUp, FaultBlackholeDown, FaultReset, FaultLatency,
	FaultPauseProcess, FaultKillProcess, FaultClientPause, FaultKillPubSub,
	FaultPauseServer, FaultRestart, FaultFlush, FaultMigrate,
}

// Plan draws a fault schedule from seed: faults start on average every
// gap over [lead, length-quiet), last up to maxFor, and overlap in time
// wherever they strike different things (a worker's connections, a
// worker process, a server); two faults on one thing never overlap, so
// each heals exactly. Every fault ends before length-quiet: the workload
// goes on without faults for quiet, in which waiters must get the locks
// that are free (the liveness check). The same seed gives the same
// schedule.
func Plan(seed int64, types []string, slots int, length, quiet, gap, maxFor time.Duration) []PlannedFault {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x6e656d65736973))
	const lead = 500 * time.Millisecond
	tail := quiet
	busy := map[string]time.Duration{} // thing -> free again at
	var plan []PlannedFault
	at := lead
	for {
		at += time.Duration(rng.Float64() * 2 * float64(gap))
		if at >= length-tail-100*time.Millisecond {
			break
		}
		f := PlannedFault{Type: types[rng.IntN(len(types))], Slot: rng.IntN(slots), At: at}
		dur := time.Duration(200+rng.IntN(int(maxFor/time.Millisecond)-200)) * time.Millisecond
		var things []string
		switch f.Type {
		case FaultBlackhole, FaultBlackholeUp, FaultBlackholeDown, FaultLatency:
			f.For = dur
			if rng.IntN(4) == 0 {
				f.Slot = -1
			}
			things = netThings(f.Slot, slots)
		case FaultReset:
			if rng.IntN(3) == 0 {
				f.Slot = -1
			}
			things = netThings(f.Slot, slots)
		case FaultPauseProcess:
			f.For = dur
			things = []string{fmt.Sprintf("proc%d", f.Slot)}
		case FaultKillProcess:
			things = []string{fmt.Sprintf("proc%d", f.Slot)}
		case FaultClientPause, FaultKillPubSub, FaultFlush:
			f.Slot, f.Server = -1, "lock"
			if f.Type == FaultClientPause {
				f.For = dur
			}
		case FaultMigrate:
			f.Slot, f.Server, f.Pick = -1, "slots", rng.IntN(1<<30)
			if rng.IntN(2) == 0 {
				f.For = dur // half moved that long (redistest.Cluster.MigrateHalting)
			}
		case FaultPauseServer, FaultRestart:
			f.Slot, f.Server = -1, "lock"
			// A schedule with slot migrations is a cluster's: its
			// masters are not paused or restarted (ClusterFaults).
			if rng.IntN(3) == 0 || slices.Contains(types, FaultMigrate) {
				f.Server = fmt.Sprintf("red%d", rng.IntN(3))
			}
			if f.Type == FaultPauseServer {
				f.For = dur
			}
		}
		if f.Server != "" {
			things = []string{f.Server}
			if strings.HasPrefix(f.Server, "red") {
				things = append(things, "red") // one RedLock node down at a time
			}
		}
		if end := length - tail; f.At+f.For > end {
			f.For = end - f.At
		}
		free := true
		for _, th := range things {
			if busy[th] > f.At {
				free = false
			}
		}
		if !free {
			continue
		}
		for _, th := range things {
			busy[th] = f.At + f.For + 50*time.Millisecond
		}
		plan = append(plan, f)
	}
	// A cluster's schedule always moves a slot, half of the time halting
	// half moved: a short CI run drew none in about half of its seeds.
	if slices.Contains(types, FaultMigrate) && !slices.ContainsFunc(plan, func(f PlannedFault) bool { return f.Type == FaultMigrate }) {
		room := length - tail - maxFor - lead
		f := PlannedFault{Type: FaultMigrate, Slot: -1, Server: "slots", Pick: rng.IntN(1 << 30)}
		f.At = lead + time.Duration(rng.Int64N(int64(max(room, time.Millisecond))))
		f.For = time.Duration(200+rng.IntN(int(maxFor/time.Millisecond)-200)) * time.Millisecond
		if end := length - tail; f.At+f.For > end {
			f.For = max(end-f.At, 0)
		}
		plan = append(plan, f)
	}
	slices.SortStableFunc(plan, func(a, b PlannedFault) int { return cmp.Compare(a.At, b.At) })
	return plan
}

// netThings are the things a network fault on slot (-1: all) occupies.
func netThings(slot, slots int) []string {
	if slot >= 0 {
		return []string{fmt.Sprintf("net%d", slot)}
	}
	var out []string
	for i := range slots {
		out = append(out, fmt.Sprintf("net%d", i))
	}
	return out
}
