package runtime_test

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/runtimetest"
	"github.com/lockgen/lockgen/runtime"
)

// Tests re-execute the test binary as child processes: LOCKGEN_CHILD names
// the role, LOCKGEN_ADDR the Redis server. A child writes its results as
// JSON lines to stdout.
func TestMain(m *testing.M) {
	if role := os.Getenv("LOCKGEN_CHILD"); role != "" {
		os.Exit(runChild(role))
	}
	flag.Parse()
	if !flagSet("test.parallel") {
		// Go's default is GOMAXPROCS (2 on this project's machines), but
		// the tests that call t.Parallel wait out leases, faults and
		// failovers far more than they compute, each on servers of its
		// own; the ones whose checks are tight in time do not call it,
		// and run first, before any parallel one starts. An explicit
		// -parallel still decides.
		_ = flag.Set("test.parallel", strconv.Itoa(parallelTests))
	}
	os.Exit(m.Run())
}

// parallelTests is how many tests that call t.Parallel run at once: at
// 8 the clean-clone CI run on 2 cores had parallel tests with time bounds
// (outage bounds, a give-back window) miss them by 10-80 ms; the outage
// test has run alone since, and the give-back window is a fifth of the
// TTL. At 4 the parallel tests (about 270 s of their time) took 69 s,
// at 6 48 s.
const parallelTests = 6

// flagSet reports whether the command line set the flag name.
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

type childResult struct {
	Intervals [][2]int64 `json:"intervals,omitempty"`
	Err       string     `json:"err,omitempty"`
}

func runChild(role string) int {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("LOCKGEN_ADDR")})
	defer rdb.Close()
	opts := &runtime.Options{}
	if ms, _ := strconv.Atoi(os.Getenv("LOCKGEN_WATCHDOG_MS")); ms > 0 {
		opts.WatchdogTimeout = time.Duration(ms) * time.Millisecond
	}
	c, err := runtime.NewClient(rdb, opts)
	if err != nil {
		fmt.Println(err)
		return 2
	}
	defer c.Close()
	ctx := context.Background()
	key := os.Getenv("LOCKGEN_KEY")
	enc := json.NewEncoder(os.Stdout)
	switch role {
	case "mutex-worker":
		rounds, _ := strconv.Atoi(os.Getenv("LOCKGEN_ROUNDS"))
		m := kindByName(os.Getenv("LOCKGEN_KIND")).new(c, key, runtime.LockOptions{WaitTime: runtime.Forever})
		_ = enc.Encode(incrementRounds(ctx, rdb, key, rounds, m.Do))
	case "red-worker":
		return runRedWorker(rdb)
	case "fair-waiters":
		return runFairWaiters(c, rdb)
	case "holder":
		// Take the lock, say so, and hold it until killed.
		var err error
		if mk, ok := newCompositeInChild(rdb, opts, os.Getenv("LOCKGEN_KIND")); ok {
			c2, cerr := runtime.NewClient(rdb, opts)
			if cerr != nil {
				fmt.Println("error:", cerr)
				return 1
			}
			_, err = mk(c2).Lock(ctx)
		} else {
			_, err = kindByName(os.Getenv("LOCKGEN_KIND")).new(c, key, runtime.LockOptions{}).Lock(ctx)
		}
		if err != nil {
			fmt.Println("error:", err)
			return 1
		}
		fmt.Println("held")
		select {}
	default:
		if run, ok := childRoles[role]; ok {
			return run(c, rdb)
		}
		fmt.Println("unknown child role", role)
		return 2
	}
	return 0
}

// childRoles are the roles other test files add (sync_child_test.go).
var childRoles = map[string]func(c *runtime.Client, rdb *redis.Client) int{}

// startChild starts the test binary as a child in role with env
// (runtimetest.StartChild).
func startChild(t *testing.T, role string, env ...string) (*exec.Cmd, *bufio.Reader) {
	t.Helper()
	return runtimetest.StartChild(t, role, env...)
}

// Its kinds run at once, each on a server of its own, before the
// parallel tests: it computes more than it waits.
func TestLocksExcludeProcesses(t *testing.T) {
	t.Parallel() // no time bound: only exclusion and the counter are checked
	forEachKind(t, exclusiveKinds, func(t *testing.T, k lockKind) {
		t.Parallel()
		testExcludesProcesses(t, k)
	})
}

func testExcludesProcesses(t *testing.T, k lockKind) {
	s, rdb, _ := setup(t, nil)
	const procs, rounds = 4, 150
	type child struct {
		cmd *exec.Cmd
		out *bufio.Reader
	}
	var children []child
	for i := 0; i < procs; i++ {
		cmd, out := startChild(t, "mutex-worker", "LOCKGEN_ADDR="+s.Addr(), "LOCKGEN_KEY=proc-lock", "LOCKGEN_ROUNDS="+strconv.Itoa(rounds), "LOCKGEN_KIND="+k.name)
		children = append(children, child{cmd, out})
	}
	var all [][2]int64
	for i, ch := range children {
		data, err := io.ReadAll(ch.out)
		if err != nil {
			t.Fatal(err)
		}
		if err := ch.cmd.Wait(); err != nil {
			t.Fatalf("child %d: %v: %s", i, err, data)
		}
		var res childResult
		if err := json.Unmarshal(data, &res); err != nil {
			t.Fatalf("child %d output %q: %v", i, data, err)
		}
		if res.Err != "" {
			t.Fatalf("child %d: %s", i, res.Err)
		}
		all = append(all, res.Intervals...)
	}
	if got, _ := rdb.Get(context.Background(), "proc-lock:counter").Int(); got != procs*rounds {
		t.Fatalf("counter = %d, want %d: lost updates across processes", got, procs*rounds)
	}
	if len(all) != procs*rounds {
		t.Fatalf("%d intervals recorded, want %d", len(all), procs*rounds)
	}
	if n := countOverlaps(all); n != 0 {
		t.Fatalf("%d overlapping critical sections across processes", n)
	}
}

func TestCrashedHolderIsReplacedAfterItsLease(t *testing.T) {
	skipShortOutsideCI(t)
	t.Parallel() // a server and a child per kind; its bounds are 500 ms or more
	forEachKind(t, exclusiveKinds, testCrashedHolder)
}

func testCrashedHolder(t *testing.T, k lockKind) {
	const timeout = time.Second
	s, _, c := setup(t, &runtime.Options{WatchdogTimeout: timeout})
	cmd, out := startChild(t, "holder", "LOCKGEN_ADDR="+s.Addr(), "LOCKGEN_KEY=crash-lock", "LOCKGEN_WATCHDOG_MS=1000", "LOCKGEN_KIND="+k.name)
	line, err := out.ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "held" {
		t.Fatalf("child: %q %v", line, err)
	}
	// The child's watchdog keeps it alive well past one lease.
	time.Sleep(1500 * time.Millisecond)
	m := k.new(c, "crash-lock", runtime.LockOptions{})
	if _, err := m.TryLock(ctxT(t), 0, runtime.Watchdog); err == nil {
		t.Fatal("acquired while the child's watchdog still renews")
	}
	_ = cmd.Process.Kill()
	killed := time.Now()
	h, err := m.TryLock(ctxT(t), 5*time.Second, runtime.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Unlock(h)
	if d := time.Since(killed); d > timeout+500*time.Millisecond {
		t.Fatalf("acquired %v after the holder was killed, want <= lease + 500ms", d)
	}
}

// incrementRounds does rounds non-atomic increments of key+":counter",
// each inside do (a lock's Do), and records the critical sections.
func incrementRounds(ctx context.Context, rdb *redis.Client, key string, rounds int, do func(context.Context, func(context.Context) error) error) childResult {
	var res childResult
	for i := 0; i < rounds; i++ {
		err := do(ctx, func(ctx context.Context) error {
			start := time.Now()
			v, err := rdb.Get(ctx, key+":counter").Int()
			if err != nil && err != redis.Nil {
				return err
			}
			if err := rdb.Set(ctx, key+":counter", v+1, 0).Err(); err != nil {
				return err
			}
			res.Intervals = append(res.Intervals, [2]int64{start.UnixNano(), time.Now().UnixNano()})
			return nil
		})
		if err != nil {
			res.Err = err.Error()
			break
		}
	}
	return res
}
