package robustness

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/lockgen/lockgen/internal/redistest"
)

// A seed is a schedule: the same seed plans the same faults, another seed
// others; every fault heals before the quiet end, and two faults never
// strike one thing at once (so each heal undoes exactly its fault).
func TestPlanIsTheSeedsScheduleAndHealsBeforeTheQuietEnd(t *testing.T) {
	const length, quiet = 40 * time.Second, 6 * time.Second
	a := Plan(7, DefaultFaults, 4, length, quiet, time.Second, 3*time.Second)
	b := Plan(7, DefaultFaults, 4, length, quiet, time.Second, 3*time.Second)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("the same seed planned two schedules")
	}
	if reflect.DeepEqual(a, Plan(8, DefaultFaults, 4, length, quiet, time.Second, 3*time.Second)) {
		t.Fatal("seeds 7 and 8 planned the same schedule")
	}
	if len(a) < 10 {
		t.Fatalf("%d faults in %v, want a fault about every second", len(a), length)
	}
	types := map[string]bool{}
	for i, f := range a {
		types[f.Type] = true
		if f.At+f.For > length-quiet {
			t.Errorf("%v ends after the quiet end %v", f, length-quiet)
		}
		for _, g := range a[:i] {
			if g.At+g.For+50*time.Millisecond > f.At && sharesAThing(f, g) {
				t.Errorf("%v overlaps %v on one thing", f, g)
			}
		}
	}
	if len(types) < 8 {
		t.Errorf("only %d fault types in one schedule: %v", len(types), types)
	}
}

// A cluster's schedule moves a slot at least once, whatever the seed.
func TestEveryClusterScheduleMigratesASlot(t *testing.T) {
	const length, quiet = 15 * time.Second, 4 * time.Second
	halted := 0
	for seed := range int64(200) {
		var n int
		for _, f := range Plan(seed, ClusterFaults, 4, length, quiet, time.Second, 3*time.Second) {
			if f.Type == FaultMigrate {
				n++
				if f.For > 0 {
					halted++
				}
				if f.At+f.For > length-quiet {
					t.Errorf("seed %d: %v ends after the quiet end", seed, f)
				}
			}
		}
		if n == 0 {
			t.Fatalf("seed %d: no slot migration in a cluster's schedule", seed)
		}
	}
	if halted < 50 {
		t.Errorf("%d of 200 schedules halt a migration half moved, want about half or more", halted)
	}
}

func sharesAThing(f, g PlannedFault) bool {
	net := func(p PlannedFault) bool {
		switch p.Type {
		case FaultBlackhole, FaultBlackholeUp, FaultBlackholeDown, FaultLatency, FaultReset:
			return true
		}
		return false
	}
	proc := func(p PlannedFault) bool { return p.Type == FaultPauseProcess || p.Type == FaultKillProcess }
	switch {
	case net(f) && net(g):
		return f.Slot < 0 || g.Slot < 0 || f.Slot == g.Slot
	case proc(f) && proc(g):
		return f.Slot == g.Slot
	case f.Server != "" && g.Server != "":
		return f.Server == g.Server || f.Server != "lock" && g.Server != "lock"
	}
	return false
}

// A FLUSHALL injected while the lock server restarts waits until it is
// back and flushes what it reloaded: the history says a flush happened.
func TestFlushAllWaitsForARestartingServer(t *testing.T) {
	s := redistest.Start(t, redistest.Arg("--appendonly", "yes", "--appendfsync", "always"))
	ctx := context.Background()
	if err := s.Client(t).Set(ctx, "plain:0", 2, 0).Err(); err != nil {
		t.Fatal(err)
	}
	s.Kill()
	go func() {
		time.Sleep(300 * time.Millisecond)
		s.Restart() // reloads plain:0 from the append-only file
	}()
	if err := flushAll(s.Addr(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Client(t).Exists(ctx, "plain:0").Result(); err != nil || n != 0 {
		t.Fatalf("plain:0 exists: %d, %v; want it flushed after the restart", n, err)
	}
}
