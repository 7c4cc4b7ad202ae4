// Command bench runs lockgen's runtime side by side with go-redsync/redsync,
// bsm/redislock and rueidis/rueidislock on a redis-server it starts
// itself, and writes RESULTS.md and handoff.svg. See README.md.
//
//	cd bench && go run .          # full run, < 8 minutes on 2 cores
//	cd bench && go run . -quick   # < 2 minutes, for development
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

type config struct {
	quick                bool
	uncontended          time.Duration
	contention, naive    time.Duration
	manyKeys             time.Duration
	watchLocks           int
	watchLease, watchWin time.Duration
	limitN1, limitN50    int
	floorN               int // samples of each idle floor
	workers              []int
	// shapeWorkers are the worker counts of the sleeping-hold and
	// multi-process variants of scenario 2 (scenarios 7 and 8).
	shapeWorkers []int
	procs        int
	// clusterWorkers are the worker counts of scenario 9's one-key table;
	// clusterKeys the keys of its many-keys table (2 goroutines each).
	clusterWorkers []int
	clusterKeys    int
}

type bench struct {
	cfg   config
	srv   *server
	admin *redis.Client // INFO and bookkeeping only; never counted for a library
	// be is where the contention scenarios run: the single server, or
	// the cluster in the copy of bench that runs scenario 9.
	be *backend
	// what a multi-process run's children need to rebuild the rows
	lockgenVersion, redisVersion string
}

func main() {
	log.SetFlags(log.Ltime)
	if len(os.Args) > 1 && os.Args[1] == "-child" {
		if err := childMain(); err != nil {
			log.Fatal(err)
		}
		return
	}
	if len(os.Args) > 3 && os.Args[1] == "-floor" {
		n, err := strconv.Atoi(os.Args[3])
		if err == nil {
			err = floorMain(os.Args[2], n)
		}
		if err != nil {
			log.Fatal(err)
		}
		return
	}
	if err := benchmark(); err != nil {
		log.Fatal(err)
	}
}

// benchmark is the whole run. It returns its errors rather than exiting,
// so the redis-server it started is always stopped.
func benchmark() error {
	quick := flag.Bool("quick", false, "short run (< 2 minutes) for development; numbers are noisier")
	out := flag.String("out", ".", "directory for RESULTS.md and handoff.svg")
	serverBin := flag.String("redis-server", "redis-server", "redis-server binary")
	benchBin := flag.String("redis-benchmark", "redis-benchmark", "redis-benchmark binary")
	only := flag.String("only", "", "comma-separated scenario numbers to run (default: all); RESULTS.md then holds only those")
	rows := flag.String("rows", "", "run only rows whose name contains this (development)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the run (development)")
	clusterOnly := flag.Bool("cluster", false, "run only scenario 9, the Redis Cluster rows (same as -only 9)")
	flag.Parse()
	if *clusterOnly {
		*only = "9"
	}

	cfg := config{
		uncontended: 3 * time.Second, contention: 2 * time.Second, naive: time.Second,
		manyKeys: 2 * time.Second, watchLocks: 10000, watchLease: 30 * time.Second, watchWin: 20 * time.Second,
		limitN1: 20000, limitN50: 200000, floorN: 1000, workers: []int{2, 8, 32, 128}, shapeWorkers: []int{8, 32}, procs: 4,
		clusterWorkers: []int{8, 32}, clusterKeys: 1000,
	}
	if *quick {
		cfg = config{quick: true,
			uncontended: 700 * time.Millisecond, contention: 600 * time.Millisecond, naive: 300 * time.Millisecond,
			manyKeys: 800 * time.Millisecond, watchLocks: 10000, watchLease: 3 * time.Second, watchWin: 3 * time.Second,
			limitN1: 5000, limitN50: 50000, floorN: 300, workers: []int{8, 32, 128}, shapeWorkers: []int{32}, procs: 4,
			clusterWorkers: []int{32}, clusterKeys: 1000,
		}
	}
	want := func(n int) bool {
		return *only == "" || strings.Contains(","+*only+",", fmt.Sprintf(",%d,", n))
	}

	srv, err := startRedis(*serverBin)
	if err != nil {
		return err
	}
	defer srv.stop()
	be := newBackend([]string{srv.addr}, false)
	defer be.close()
	b := &bench{cfg: cfg, srv: srv, admin: be.admins[0], be: be, lockgenVersion: lockgenVersion()}
	ctx := context.Background()
	srvInfo, err := info(ctx, b.admin, "server")
	if err != nil {
		return err
	}
	res := &results{
		Started: time.Now(), Quick: cfg.quick, RedisVersion: srvInfo["redis_version"],
		LockgenVersion: b.lockgenVersion, Cfg: cfg, Load: loadAvg(),
	}
	b.redisVersion = res.RedisVersion
	res.Libs = libraries(res.LockgenVersion, res.RedisVersion)
	if *rows != "" {
		res.Libs = slices.DeleteFunc(res.Libs, func(l *lib) bool { return !strings.Contains(l.Name, *rows) })
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		must(pprof.StartCPUProfile(f))
		defer pprof.StopCPUProfile()
	}
	log.Printf("redis %s on %s; %d rows", res.RedisVersion, srv.addr, len(res.Libs))

	if want(5) {
		bin, err := exec.LookPath(*benchBin)
		if err != nil {
			return fmt.Errorf("redis-benchmark not found (%v); pass -redis-benchmark", err)
		}
		log.Print("5. physical limit (redis-benchmark)")
		if res.Limit, err = b.physicalLimit(bin, cfg.limitN1, cfg.limitN50); err != nil {
			return err
		}
		log.Print("5. idle floor (a round trip, a message across processes)")
		if res.Floor, err = b.idleFloor(cfg.floorN); err != nil {
			return err
		}
	}
	if want(1) {
		// Many short rounds, rows interleaved: on a shared 2-core machine a
		// row's speed swings by up to 2× from one window to the next with
		// where the scheduler puts the client and Redis.
		const rounds = 30
		byLib := make(map[*lib][]*run)
		for i := range rounds {
			if i%10 == 0 {
				log.Printf("1. uncontended, rounds %d–%d of %d", i+1, min(i+10, rounds), rounds)
			}
			for _, l := range res.Libs {
				if l.mutexLike() {
					byLib[l] = append(byLib[l], b.uncontended(l, cfg.uncontended/rounds))
				}
			}
		}
		for _, l := range res.Libs {
			if rs := byLib[l]; len(rs) > 0 {
				res.Uncontended = append(res.Uncontended, merge(rs))
			}
		}
		b.flush()
	}
	if want(2) || want(6) {
		for _, w := range cfg.workers {
			for _, l := range res.Libs {
				if l.Kind == "rw" || (l.Kind == "mutex" && !want(2)) || (l.Kind == "fair" && !want(6)) {
					continue
				}
				log.Printf("2. contention, %d workers: %s", w, l.Name)
				s := shape{Workers: w, Keys: 1, Hold: 200 * time.Microsecond, SpinHold: true, Think: time.Millisecond, Dur: cfg.contention}
				r := b.contend(l, s, fmt.Sprintf("c%d:%s", w, l.Name))
				n := b.contend(l, shape{Workers: w, Keys: 1, Dur: cfg.naive}, fmt.Sprintf("n%d:%s", w, l.Name))
				res.Contention = append(res.Contention, pair{Real: r, Naive: n})
				log.Printf("   %.0f acq/s, wait p99 %v, gap p99 %v, fairness %.2f, %.1f cmds/acq, %d violations",
					r.rate(), r.Wait.q(0.99), r.Gap.q(0.99), r.Fairness, r.redisPerAcq(), r.Violations)
				b.flush()
			}
		}
	}
	for _, sc := range []struct {
		n     int
		procs int
		out   *[]*run
	}{{7, 1, &res.Sleep}, {8, cfg.procs, &res.Procs}} {
		if !want(sc.n) {
			continue
		}
		for _, w := range cfg.shapeWorkers {
			for _, l := range res.Libs {
				if !l.mutexLike() {
					continue
				}
				s := shape{Workers: w, Keys: 1, Hold: 200 * time.Microsecond, Think: time.Millisecond, Dur: cfg.contention, Procs: sc.procs}
				log.Printf("%d. contention, sleeping hold, %d workers in %d process(es): %s", sc.n, w, sc.procs, l.Name)
				r := b.contend(l, s, fmt.Sprintf("s%d.%d:%s", w, sc.procs, l.Name))
				*sc.out = append(*sc.out, r)
				log.Printf("   %.0f acq/s, wait p99 %v, gap p50 %v, fairness %.2f, hold %v, %d violations",
					r.rate(), r.Wait.q(0.99), r.Gap.q(0.5), r.Fairness, r.Hold, r.Violations)
			}
		}
		b.flush()
	}
	if want(6) {
		for _, l := range res.Libs {
			if l.Kind != "rw" && l.Name != "lockgen" && !strings.Contains(l.Name, "tuned") && l.Name != "rueidislock (1 key)" {
				continue
			}
			log.Printf("6. read-write, 32 workers, 90%% reads: %s", l.Name)
			s := shape{Workers: 32, Keys: 1, Hold: time.Millisecond, Think: time.Millisecond, ReadShare: 0.9, Dur: cfg.contention}
			res.ReadWrite = append(res.ReadWrite, b.contend(l, s, "rw:"+l.Name))
		}
		b.flush()
	}
	if want(3) {
		for _, l := range res.Libs {
			if !l.mutexLike() {
				continue
			}
			log.Printf("3. many keys: %s", l.Name)
			s := shape{Workers: 64, Keys: 1000, Hold: 200 * time.Microsecond, Think: time.Millisecond, Dur: cfg.manyKeys}
			res.ManyKeys = append(res.ManyKeys, b.contend(l, s, "m:"+l.Name))
		}
		b.flush()
	}
	if want(4) {
		n, lease, win := cfg.watchLocks, cfg.watchLease, cfg.watchWin
		ver := res.LockgenVersion
		log.Printf("4. watchdog: lockgen, %d locks for %v", n, win)
		res.Watchdog = append(res.Watchdog, b.watchdog("lockgen", ver,
			fmt.Sprintf("Options.WatchdogTimeout %v (renewal every %v by the Client's one watchdog)", lease, lease/3),
			n, lease, win, openLockgenKeeper(lease)))
		b.flush()
		log.Printf("4. watchdog: redsync")
		res.Watchdog = append(res.Watchdog, b.watchdog("redsync", moduleVersion("github.com/go-redsync/redsync/v4"),
			fmt.Sprintf("WithExpiry(%v); a goroutine per lock calls Extend every %v", lease, lease/3),
			n, lease, win, openRedsyncKeeper(lease)))
		b.flush()
		log.Printf("4. watchdog: bsm/redislock")
		res.Watchdog = append(res.Watchdog, b.watchdog("bsm/redislock", moduleVersion("github.com/bsm/redislock"),
			fmt.Sprintf("ttl %v; a goroutine per lock calls Refresh(ttl) every %v", lease, lease/3),
			n, lease, win, openBsmKeeper(lease)))
		b.flush()
		log.Printf("4. watchdog: rueidislock")
		noLoop := atLeast(res.RedisVersion, 7, 0, 5)
		res.Watchdog = append(res.Watchdog, b.watchdog("rueidislock", moduleVersion("github.com/redis/rueidis"),
			fmt.Sprintf("KeyMajority 1, KeyValidity %v, ExtendInterval %v (its own goroutine per lock key extends), NoLoopTracking %v; TryWithContext", lease, lease/3, noLoop),
			n, lease, win, openRueidisKeeper(lease, noLoop)))
		b.flush()
	}
	if want(9) {
		if res.Cluster, err = b.onCluster(*serverBin, res.Libs); err != nil {
			return err
		}
	}
	res.Finished = time.Now()
	res.Load = fmt.Sprintf("1-minute load average %s at the start, %s at the end", res.Load, loadAvg())

	if err := os.WriteFile(filepath.Join(*out, "RESULTS.md"), []byte(res.markdown()), 0o644); err != nil {
		return err
	}
	if len(res.Contention) > 0 {
		if err := res.chart(filepath.Join(*out, "handoff.svg")); err != nil {
			return err
		}
	}
	log.Printf("wrote %s in %v", filepath.Join(*out, "RESULTS.md"), res.Finished.Sub(res.Started).Round(time.Second))
	return nil
}

// flush empties Redis between scenarios (every lock is released by then).
func (b *bench) flush() { b.be.flush() }

// mutexLike rows run the exclusive-lock scenarios 1 and 3.
func (l *lib) mutexLike() bool { return l.Kind == "mutex" || l.Kind == "fair" }
