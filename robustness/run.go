package robustness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/faultproxy"
	"github.com/lockgen/lockgen/internal/redistest"
)

// Config is one run of the suite.
type Config struct {
	Seed       int64
	Length     time.Duration // how long the workload and the faults run
	Procs      int           // worker processes at any time (a killed one is replaced)
	Goroutines int           // per process
	// Sharing decides which goroutines of a process share a Client, as
	// a service's goroutines share one: 0 draws it per process from the
	// seed (a quarter of the processes give each goroutine its own
	// Client, the others put two or more on one), -1 gives each its own,
	// n > 1 puts every n goroutines on one Client.
	Sharing  int
	Watchdog time.Duration
	Kinds    []string // empty: AllKinds
	Faults   []string // empty: DefaultFaults (ClusterFaults on a cluster)
	// Cluster runs the lock server as a local Redis Cluster (3 masters,
	// each with a replica); the RedLock nodes stay single servers.
	Cluster  bool
	FaultGap time.Duration
	MaxFault time.Duration
	// Quiet is the end of the workload that runs without faults (after
	// the last one healed): LivenessBound + 2 s unless set.
	Quiet time.Duration
	// Worker is the binary run as a worker process with WorkerEnv set:
	// the test binary itself, or (the suite's self-test) one built from a
	// broken runtime.
	Worker string
	Dir    string // the run's files: histories, and what a failure leaves
	// KillHolders, when set, times each process kill: it waits (up to a
	// second, and not past the faults' end) until the process has held
	// a watchdog lock this long, read from its history file. The suite's
	// self-test sets it past the first renewal, so that a broken renewal
	// shows in the lock a killed holder leaves behind.
	KillHolders time.Duration
}

func (c *Config) defaults() {
	if c.Procs == 0 {
		c.Procs = 4
	}
	if c.Goroutines == 0 {
		c.Goroutines = 3
	}
	if c.Watchdog == 0 {
		c.Watchdog = 2 * time.Second
	}
	if len(c.Kinds) == 0 {
		c.Kinds = AllKinds
	}
	if len(c.Faults) == 0 {
		c.Faults = DefaultFaults
		if c.Cluster {
			c.Faults = ClusterFaults
		}
	}
	if c.FaultGap == 0 {
		c.FaultGap = time.Second
	}
	if c.MaxFault == 0 {
		c.MaxFault = 3 * time.Second
	}
	if c.Quiet == 0 {
		c.Quiet = LivenessBound(c.Watchdog) + 2*time.Second
	}
	if c.Worker == "" {
		c.Worker = os.Args[0]
	}
}

// LivenessBound is how long the final sweep waits for each lock: a holder
// killed at the end of the workload keeps its lock for a lease, a waiter
// killed in a fair queue keeps its place for QueueTimeout, and a frozen
// pub/sub connection is found within the hub's ping bound (under 1 s).
func LivenessBound(watchdog time.Duration) time.Duration {
	return max(watchdog, QueueTimeout) + 2*time.Second
}

// Outcome is what a run produced.
type Outcome struct {
	History *History
	Results []Result
	Plan    []PlannedFault
}

// Violations counts the violations of every check.
func (o *Outcome) Violations() int {
	n := 0
	for _, r := range o.Results {
		n += len(r.Violations)
	}
	return n
}

// Run starts the servers (a lock server with an append-only file, three
// RedLock nodes, a storage server no fault touches), a fault proxy per
// worker slot and server, the worker processes and the nemesis; after
// cfg.Length it heals, has every worker sweep the locks and exit, reads
// the histories and checks them.
func Run(t testing.TB, cfg Config) *Outcome {
	t.Helper()
	cfg.defaults()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	aof := redistest.Arg("--appendonly", "yes", "--appendfsync", "always")
	r := &runner{t: t, cfg: cfg, servers: map[string]*redistest.Server{}}
	if cfg.Cluster {
		r.cluster = redistest.StartCluster(t)
		r.masters = r.cluster.Masters()
	} else {
		r.servers["lock"] = redistest.Start(t, aof)
	}
	reds := redistest.StartN(t, 3, aof)
	for i, s := range reds {
		r.servers[fmt.Sprintf("red%d", i)] = s
	}
	r.storage = redistest.Start(t).Addr()
	r.slots = make([]*slot, cfg.Procs)
	for i := range r.slots {
		sl := &slot{}
		if r.cluster != nil {
			sl.nodes = map[string]*faultproxy.Proxy{}
			for _, n := range r.cluster.Nodes() {
				sl.nodes[n.Addr()] = faultproxy.Start(t, n.Addr())
			}
		} else {
			sl.lock = faultproxy.Start(t, r.servers["lock"].Addr())
		}
		for _, s := range reds {
			sl.red = append(sl.red, faultproxy.Start(t, s.Addr()))
		}
		r.slots[i] = sl
	}
	plan := Plan(cfg.Seed, cfg.Faults, cfg.Procs, cfg.Length, cfg.Quiet, cfg.FaultGap, cfg.MaxFault)
	r.begin = time.Now()
	for i := range r.slots {
		r.spawn(i)
	}
	var nem sync.WaitGroup
	for _, f := range plan {
		nem.Add(1)
		go func() {
			defer nem.Done()
			time.Sleep(time.Until(r.begin.Add(f.At)))
			r.inject(f)
		}()
	}
	time.Sleep(time.Until(r.begin.Add(cfg.Length)))
	nem.Wait()

	// Every fault has healed: the workers stop, sweep and exit.
	r.mu.Lock()
	r.ending = true
	slots := append([]*slot(nil), r.slots...)
	r.mu.Unlock()
	for _, sl := range slots {
		r.mu.Lock()
		p := sl.proc
		r.mu.Unlock()
		if p != nil {
			_, _ = io.WriteString(p.stdin, "sweep\n")
		}
	}
	for _, sl := range slots {
		r.mu.Lock()
		p := sl.proc
		r.mu.Unlock()
		if p == nil {
			continue
		}
		select {
		case <-p.exited:
		case <-time.After(3*LivenessBound(cfg.Watchdog)*time.Duration(len(AllKinds)) + 30*time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
			r.event(Event{Proc: p.proc, Ev: EvExit, Outcome: OutFail, Err: "stuck: did not finish its sweep and Close"})
		}
	}

	// Leases of killed holders run out; then nothing may be left behind
	// but bookkeeping that expires.
	time.Sleep(cfg.Watchdog + 500*time.Millisecond)
	lim := RunLimits(cfg.Watchdog)
	var ctl redis.UniversalClient
	if r.cluster != nil {
		ctl = r.cluster.Client(t)
	} else {
		ctl = r.servers["lock"].Client(t)
	}
	hyg := CheckHygiene(context.Background(), ctl, lim)

	events := r.collect()
	h := Build(cfg.Seed, events)
	results := append(CheckAll(h, lim, cfg.Dir), hyg)
	return &Outcome{History: h, Results: results, Plan: plan}
}

// RunLimits are the checkers' limits for a run with the given watchdog
// lease: what every run checks with, and what a recheck of its history
// must use.
func RunLimits(watchdog time.Duration) Limits {
	return Limits{
		Watchdog:   watchdog,
		Permits:    map[string]int{"sem:0": SemaphorePermits},
		PauseSlack: 150 * time.Millisecond,
		Liveness:   LivenessBound(watchdog),
		DataKeys:   IsDataKey,
	}
}

// IsDataKey reports whether key is data the workload owns (counters of
// semaphores and latches, fencing counters), not lock bookkeeping.
func IsDataKey(key string) bool {
	switch key {
	case "sem:0", "plain:0", "latch:0":
		return true
	}
	return strings.HasPrefix(key, "redisson_lock_token:")
}

type runner struct {
	t       testing.TB
	cfg     Config
	servers map[string]*redistest.Server // "lock" (one server), "red0".."red2"
	cluster *redistest.Cluster           // the lock server on a cluster run
	masters []*redistest.Server          // its masters (no fault fails one over)
	storage string
	begin   time.Time

	mu       sync.Mutex
	slots    []*slot
	nextProc int
	nextF    int64
	ending   bool
	events   []Event // the nemesis' and the processes' lives
	files    []string
}

// slot is one place for a worker process: its proxies stay, the process
// in it is replaced when killed.
type slot struct {
	lock  *faultproxy.Proxy
	nodes map[string]*faultproxy.Proxy // on a cluster, instead of lock: by node address
	red   []*faultproxy.Proxy
	proc  *proc
	// faulting is held by the process fault striking the slot.
	faulting sync.Mutex
}

type proc struct {
	proc   int
	file   string // its history
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr bytes.Buffer
	exited chan struct{}
}

func (r *runner) event(e Event) {
	if e.T == 0 {
		e.T = Now()
	}
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

// spawn starts a worker process in slot i.
func (r *runner) spawn(i int) {
	r.mu.Lock()
	id := r.nextProc
	r.nextProc++
	sl := r.slots[i]
	file := filepath.Join(r.cfg.Dir, fmt.Sprintf("history-p%d.jsonl", id))
	r.files = append(r.files, file)
	r.mu.Unlock()
	wc := WorkerConfig{
		Proc: id, Seed: r.cfg.Seed, StorageAddr: r.storage, History: file,
		Goroutines: r.cfg.Goroutines, Sharing: r.cfg.Sharing, Watchdog: r.cfg.Watchdog, Liveness: LivenessBound(r.cfg.Watchdog), Kinds: r.cfg.Kinds,
	}
	if sl.lock != nil {
		wc.LockAddr = sl.lock.Addr()
	} else {
		wc.ClusterNodes = map[string]string{}
		for node, p := range sl.nodes {
			wc.ClusterNodes[node] = p.Addr()
		}
	}
	for _, p := range sl.red {
		wc.RedAddrs = append(wc.RedAddrs, p.Addr())
	}
	js, _ := json.Marshal(wc)
	p := &proc{proc: id, file: file, exited: make(chan struct{})}
	p.cmd = exec.Command(r.cfg.Worker, "-test.run=^$")
	p.cmd.Env = append(os.Environ(), WorkerEnv+"="+string(js))
	p.cmd.Stderr = &p.stderr
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		r.t.Errorf("robustness: worker %d: %v", id, err)
		return
	}
	if err := p.cmd.Start(); err != nil {
		r.t.Errorf("robustness: worker %d: %v", id, err)
		return
	}
	r.event(Event{Proc: id, Ev: EvProcess, F: "worker"})
	go func() {
		err := p.cmd.Wait()
		e := Event{Proc: id, Ev: EvExit, Outcome: OutOK}
		if err != nil {
			e.Outcome, e.Err = OutFail, strings.TrimSpace(fmt.Sprintf("%v: %s", err, lastLines(p.stderr.String(), 5)))
			// The whole of what it printed (a race report, a panic) is
			// kept where the run's folder is not: it goes with the test.
			if p.stderr.Len() == 0 {
				// Killed: it had nothing to say.
			} else if f, ferr := os.CreateTemp("", fmt.Sprintf("lockgen-robustness-seed-%d-p%d-*.stderr", r.cfg.Seed, id)); ferr == nil {
				_, _ = f.Write(p.stderr.Bytes())
				_ = f.Close()
				e.Err += " (all of its stderr: " + f.Name() + ")"
			}
		}
		r.event(e)
		close(p.exited)
	}()
	r.mu.Lock()
	sl.proc = p
	r.mu.Unlock()
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], " | ")
}

// awaitHolder waits until the process writing history file has held a
// watchdog lock for at least age, for a second at most and not past the
// faults' end (Config.KillHolders).
func (r *runner) awaitHolder(file string, age time.Duration) {
	stop := time.Now().Add(min(time.Second, time.Until(r.begin.Add(r.cfg.Length-r.cfg.Quiet))))
	for time.Now().Before(stop) {
		if oldestWatchdogHold(file) >= age {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// oldestWatchdogHold is how long the oldest watchdog hold in a history
// file has been held (0: none is held).
func oldestWatchdogHold(file string) time.Duration {
	f, err := os.Open(file)
	if err != nil {
		return 0
	}
	defer f.Close()
	evs, _ := ReadEvents(f)
	watchdog := map[int64]bool{} // acquires with a watchdog lease
	held := map[int64]int64{}    // -> when acquired
	for _, e := range evs {
		switch {
		case e.Ev == EvInvoke && e.F == FAcquire && e.Lease == 0:
			watchdog[e.Op] = true
		case e.Ev == EvReturn && e.Outcome == OutOK && watchdog[e.Op]:
			held[e.Op] = e.T
		case e.Ev == EvDone, e.Ev == EvRelease:
			delete(held, e.Op)
		}
	}
	oldest := Now()
	for _, at := range held {
		oldest = min(oldest, at)
	}
	return time.Duration(Now() - oldest)
}

// inject runs one fault to its end, recording its start and end.
func (r *runner) inject(f PlannedFault) {
	r.mu.Lock()
	r.nextF++
	id := r.nextF
	r.mu.Unlock()
	if f.Type == FaultPauseProcess || f.Type == FaultKillProcess {
		// A kill that waits for a holder (KillHolders) may still wait
		// when the slot's next fault is due: that one strikes after it.
		sl := r.slots[f.Slot]
		sl.faulting.Lock()
		defer sl.faulting.Unlock()
	}
	target := f.Server
	if target == "" {
		target = "all"
		if f.Slot >= 0 {
			r.mu.Lock()
			if p := r.slots[f.Slot].proc; p != nil {
				target = ProcTarget(p.proc)
			}
			r.mu.Unlock()
		}
	}
	start := func() { r.event(Event{Proc: -1, Op: id, Ev: EvStart, Kind: f.Type, Key: target}) }
	end := func() { r.event(Event{Proc: -1, Op: id, Ev: EvEnd, Kind: f.Type, Key: target}) }
	proxies := func() []*faultproxy.Proxy {
		r.mu.Lock()
		defer r.mu.Unlock()
		var ps []*faultproxy.Proxy
		for i, sl := range r.slots {
			if f.Slot < 0 || f.Slot == i {
				if sl.lock != nil {
					ps = append(ps, sl.lock)
				}
				for _, p := range sl.nodes {
					ps = append(ps, p)
				}
				ps = append(ps, sl.red...)
			}
		}
		return ps
	}
	switch f.Type {
	case FaultBlackhole, FaultBlackholeUp, FaultBlackholeDown, FaultLatency:
		dir := map[string]faultproxy.Direction{FaultBlackhole: faultproxy.Both, FaultBlackholeUp: faultproxy.Upstream,
			FaultBlackholeDown: faultproxy.Downstream, FaultLatency: faultproxy.Downstream}[f.Type]
		start()
		for _, p := range proxies() {
			if f.Type == FaultLatency {
				p.Latency(dir, 50*time.Millisecond)
			} else {
				p.Blackhole(dir)
			}
		}
		time.Sleep(f.For)
		for _, p := range proxies() {
			p.Heal()
		}
		end()
	case FaultReset:
		start()
		for _, p := range proxies() {
			p.Reset()
		}
		end()
	case FaultPauseProcess, FaultKillProcess:
		r.mu.Lock()
		p := r.slots[f.Slot].proc
		r.mu.Unlock()
		if p == nil {
			return
		}
		if f.Type == FaultKillProcess && r.cfg.KillHolders > 0 {
			r.awaitHolder(p.file, r.cfg.KillHolders)
		}
		start()
		if f.Type == FaultPauseProcess {
			_ = p.cmd.Process.Signal(syscall.SIGSTOP)
			time.Sleep(f.For)
			_ = p.cmd.Process.Signal(syscall.SIGCONT)
			end()
			return
		}
		_ = p.cmd.Process.Kill()
		<-p.exited
		end()
		r.spawn(f.Slot)
	case FaultClientPause:
		start()
		_ = r.control("lock", func(ctx context.Context, c *redis.Client) error {
			return c.Do(ctx, "client", "pause", f.For.Milliseconds(), "write").Err()
		})
		time.Sleep(f.For)
		end()
	case FaultKillPubSub:
		start()
		_ = r.control("lock", killSubscribers)
		end()
	case FaultFlush:
		start()
		for _, addr := range r.addrs("lock") {
			if err := flushAll(addr, 10*time.Second); err != nil {
				r.t.Logf("robustness: FLUSHALL of the lock server %s failed, but is in the history: %v", addr, err)
			}
		}
		end()
	case FaultMigrate:
		start()
		if err := r.migrate(f.Pick, f.For); err != nil {
			r.t.Logf("robustness: %v (the fault stays in the history)", err)
		}
		end()
	case FaultPauseServer:
		start()
		r.servers[f.Server].Pause(f.For)
		end()
	case FaultRestart:
		start()
		r.servers[f.Server].Restart() // from its append-only file
		end()
	}
}

// flushAll sends FLUSHALL to addr until it is done, for up to within: a
// flush in the history must have happened, or the models forget what
// Redis kept. A restart planned just before it may still be loading the
// append-only file (LOADING) or not yet listening (seed 213947790: a
// FLUSHALL 170 ms into a 710 ms restart failed, and the plain semaphore's
// model took the count for absent).
func flushAll(addr string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := c.FlushAll(ctx).Err()
		cancel()
		_ = c.Close()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// addrs are the addresses of server: on a cluster, "lock" is every master.
func (r *runner) addrs(server string) []string {
	if server == "lock" && r.cluster != nil {
		var out []string
		for _, m := range r.masters {
			out = append(out, m.Addr())
		}
		return out
	}
	return []string{r.servers[server].Addr()}
}

// control runs fn on a fresh connection to each of server's addrs.
func (r *runner) control(server string, fn func(context.Context, *redis.Client) error) error {
	var errs []error
	for _, addr := range r.addrs(server) {
		c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		errs = append(errs, fn(ctx, c))
		cancel()
		_ = c.Close()
	}
	return errors.Join(errs...)
}

// migrate moves the slot of one of the run's lock keys to another master,
// both chosen by pick (the master after the chosen one if the slot is on
// it), keys and all (their TTLs go with them), while the workers use it;
// with halt > 0 the slot stays half moved that long, one key moved, where
// scripts on keys split between the masters meet TRYAGAIN.
func (r *runner) migrate(pick int, halt time.Duration) error {
	var keys []string
	for _, k := range r.cfg.Kinds {
		keys = append(keys, Keys(k)...)
		keys = append(keys, multiMembers[k]...)
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	key := keys[pick%len(keys)]
	var slot int64
	err := r.control("lock", func(ctx context.Context, c *redis.Client) (err error) {
		slot, err = c.ClusterKeySlot(ctx, key).Result()
		return err
	})
	if err != nil {
		return fmt.Errorf("CLUSTER KEYSLOT %s: %w", key, err)
	}
	dst := r.masters[(pick/len(keys))%len(r.masters)]
	src, err := r.cluster.MigrateHalting(int(slot), dst, halt)
	if err == nil && src == dst { // it is there: to the next one
		dst = r.masters[(slices.Index(r.masters, dst)+1)%len(r.masters)]
		src, err = r.cluster.MigrateHalting(int(slot), dst, halt)
	}
	if err != nil {
		return err
	}
	r.t.Logf("robustness: slot %d (%s) moved from %s to %s (half moved for %v)", slot, key, src, dst, halt)
	return nil
}

// killSubscribers kills every pub/sub connection and every connection
// with key tracking on.
func killSubscribers(ctx context.Context, c *redis.Client) error {
	list, err := c.ClientList(ctx).Result()
	if err != nil {
		return err
	}
	for _, line := range strings.Split(list, "\n") {
		var id, flags string
		sub := false
		for _, f := range strings.Fields(line) {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "id":
				id = v
			case "flags":
				flags = v
			case "sub", "psub", "ssub":
				sub = sub || v != "0"
			}
		}
		if id != "" && (sub || strings.Contains(flags, "t") || strings.Contains(flags, "P")) {
			_ = c.Do(ctx, "client", "kill", "id", id).Err()
		}
	}
	return nil
}

// collect reads every history file and adds the nemesis' events.
func (r *runner) collect() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	events := append([]Event(nil), r.events...)
	for _, f := range r.files {
		fh, err := os.Open(f)
		if err != nil {
			continue // a process that never started
		}
		evs, err := ReadEvents(fh)
		_ = fh.Close()
		if err != nil {
			r.t.Errorf("robustness: %s: %v", f, err)
		}
		events = append(events, evs...)
	}
	return events
}
