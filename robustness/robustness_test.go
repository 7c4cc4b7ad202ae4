package robustness

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestMain makes the test binary a worker process when the harness says
// so (WorkerEnv): the workers are this binary run again.
func TestMain(m *testing.M) {
	if os.Getenv(WorkerEnv) != "" {
		os.Exit(WorkerMain())
	}
	flag.Parse()
	if !parallelSet() {
		// Go's default is GOMAXPROCS (2 here): the self-test's four
		// structural breaks, each a short run with many violations,
		// then ran two at a time. An explicit -parallel still decides.
		_ = flag.Set("test.parallel", "4")
	}
	os.Exit(m.Run())
}

// parallelSet reports whether the command line set -test.parallel.
func parallelSet() bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	return set
}

// seedFromEnv is LOCKGEN_ROBUSTNESS_SEED, or a new seed.
func seedFromEnv(t *testing.T) int64 {
	if s := os.Getenv("LOCKGEN_ROBUSTNESS_SEED"); s != "" {
		seed, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("LOCKGEN_ROBUSTNESS_SEED=%q: %v", s, err)
		}
		return seed
	}
	return time.Now().UnixNano() % 1_000_000_000
}

// sharingFromEnv is LOCKGEN_ROBUSTNESS_SHARING=<n>, n > 1: every process
// runs at least n goroutines and puts every n of them on one Client
// (Config.Sharing), where the default draws 2 or 3 per process; 0: unset.
func sharingFromEnv(t *testing.T) int {
	s := os.Getenv("LOCKGEN_ROBUSTNESS_SHARING")
	if s == "" {
		return 0
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 2 {
		t.Fatalf("LOCKGEN_ROBUSTNESS_SHARING=%q: want a number of goroutines per Client, 2 or more", s)
	}
	return n
}

// TestRobustness runs the workload under random faults and checks the
// history. By default one short run (under 90 s on 2 cores; 12 s of
// workload with -short); with
// LOCKGEN_ROBUSTNESS=<duration> (e.g. 10m) runs of new seeds follow each
// other for that long. LOCKGEN_ROBUSTNESS_SEED=<seed> reruns a seed's
// schedule. LOCKGEN_ROBUSTNESS_SHARING=<n> puts n goroutines of each
// process on one Client (a seed found with it reruns with it).
func TestRobustness(t *testing.T) { robustness(t, false) }

// TestRobustnessOnCluster is TestRobustness with the locks on a local
// Redis Cluster (3 masters, each with a replica), whose slots migrate
// between masters while the workers use them (ClusterFaults); the same
// variables drive it. Its default run is shorter: 15 s of workload.
func TestRobustnessOnCluster(t *testing.T) { robustness(t, true) }

func robustness(t *testing.T, cluster bool) {
	// The two runs go one after the other: side by side, their load
	// starved the tests that go test runs beside this package (a fair
	// lock's hand-off test made 21 holds in 21 s).
	total, long := time.Duration(0), os.Getenv("LOCKGEN_ROBUSTNESS")
	if long != "" {
		d, err := time.ParseDuration(long)
		if err != nil {
			t.Fatalf("LOCKGEN_ROBUSTNESS=%q: %v", long, err)
		}
		total = d
	}
	seed := seedFromEnv(t)
	sharing := sharingFromEnv(t)
	start := time.Now()
	var runs, ops, faults int
	var failed []int64 // seeds with a violation: the long mode goes on
	for i := 0; ; i++ {
		cfg := Config{Seed: seed + int64(i), Length: 40 * time.Second, Cluster: cluster}
		if sharing > 0 {
			cfg.Goroutines, cfg.Sharing = max(3, sharing), sharing
		}
		if cluster {
			cfg.Length = 15 * time.Second
		}
		if testing.Short() {
			cfg.Length, cfg.Quiet = 12*time.Second, 4*time.Second
		}
		if total > 0 {
			cfg.Length = 60 * time.Second
		}
		ok := t.Run(fmt.Sprintf("seed=%d", cfg.Seed), func(t *testing.T) {
			o := Run(t, cfg)
			ops += len(o.History.Ops)
			faults += len(o.History.Faults)
			report(t, cfg, o, t.Name())
		})
		runs++
		if !ok {
			failed = append(failed, cfg.Seed)
		}
		if total == 0 || time.Since(start)+cfg.Length+20*time.Second > total {
			break
		}
	}
	if total > 0 {
		t.Logf("long mode: %d runs over %v, seeds %d..%d, %d operations, %d faults, seeds with violations: %v",
			runs, time.Since(start).Round(time.Second), seed, seed+int64(runs)-1, ops, faults, failed)
	}
}

// report prints the table, and on a violation the seed, the window of the
// history around it and the files to look at.
func report(t *testing.T, cfg Config, o *Outcome, test string) {
	t.Helper()
	var b strings.Builder
	Report(&b, o.History, o.Results)
	t.Log("\n" + b.String())
	if len(o.History.Faults) == 0 {
		t.Errorf("no fault was injected (plan: %d faults)", len(o.Plan))
	}
	checked := 0
	for _, r := range o.Results {
		checked += r.Checked
	}
	if len(o.History.Ops) == 0 || checked == 0 {
		t.Errorf("nothing was checked: %d operations, %d checked", len(o.History.Ops), checked)
	}
	if o.Violations() == 0 {
		return
	}
	// The run's own folder goes with the test; this one stays.
	dir, err := os.MkdirTemp("", fmt.Sprintf("lockgen-robustness-seed-%d-", cfg.Seed))
	if err != nil {
		t.Fatal(err)
	}
	paths, err := WriteArtifacts(dir, o.History, o.Results)
	if err != nil {
		t.Errorf("writing the history: %v", err)
	}
	for _, r := range o.Results {
		for _, v := range r.Violations {
			var w strings.Builder
			Window(&w, o.History, v, 500*time.Millisecond)
			t.Errorf("%s: %s\n%s", r.Check, v.Msg, w.String())
		}
	}
	t.Errorf("seed %d: %d violations; rerun with LOCKGEN_ROBUSTNESS_SEED=%d go test ./robustness -run '%s$' -v; files: %s",
		cfg.Seed, o.Violations(), cfg.Seed, strings.SplitN(test, "/", 2)[0], strings.Join(paths, ", "))
}
