package main

import (
	"fmt"
	goruntime "runtime"
	"strconv"
	"strings"
)

// clusterSection writes scenario 9: the cluster's tables, each with the
// connections of every process that ran the row's workers.
func (res *results) clusterSection(b *strings.Builder) {
	cr := res.Cluster
	if cr == nil {
		return
	}
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	p("## 9. Redis Cluster: %d masters\n\n", len(cr.Addrs))
	p("A local cluster of %d masters and no replicas, started by the run like the single server (`--cluster-enabled yes --save \"\" --appendonly no`, free loopback ports, the 16384 slots split evenly with CLUSTER ADDSLOTSRANGE, joined with CLUSTER MEET) and stopped at its end. ", len(cr.Addrs))
	p("The three redis-servers share the same %d cores with the bench and its children, so the cluster has no more CPU than the single server had: these tables show what running on a cluster client costs each library, not how a cluster scales. ", goruntime.NumCPU())
	p("Every row gets its own `*redis.ClusterClient` at go-redis' defaults (a pool per node); rueidislock builds a rueidis client from the three addresses, which detects the cluster. lockgen's Mutex and every peer row run here: every peer takes a cluster client (README.md, \"Redis Cluster\"). Redis cmds and Redis CPU are summed over the nodes. The machine's load average is on the Load line at the top; the other work on the box runs during these rows too.\n\n")
	p("**connections** are those the process running the row's workers held to each node as the window ended: total (node 1/node 2/node 3, of them in pub/sub mode). They are counted from both ends: the process lists its own TCP sockets (`/proc/self/fd` and `/proc/self/net/tcp`), and CLIENT LIST on every node keeps the clients on those ports, leaving out the bench's own admin clients (CLIENT SETNAME `%s`). So every connection of the process counts, whichever client inside it opened it (a go-redis pool, lockgen's pub/sub and watchdog clients, rueidis' own), once the server has it. In the multi-process table each process has its own figure.\n\n", adminName)

	if rs := cr.Uncontended; len(rs) > 0 {
		p("### 9a. Uncontended: one goroutine, acquire + release on one key\n\n")
		best := bestPeer(rs, byOpsPerSec)
		if best == nil {
			best = rs[0]
		}
		p("| Row | ops/s | windows p25–p75 | × best peer | × one server | latency p50 | p99 | allocs/op | client calls/op | Redis cmds/op | Redis CPU µs/op | connections | commandstats per op |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, r := range rs {
			lo, hi := r.windowSpread()
			one := "–"
			if s := findRun(res.Uncontended, r.Lib.Name); s != nil {
				one = ratio(r.opsPerSec() / s.opsPerSec())
			}
			p("| %s | %.0f | %.0f–%.0f | %s | %s | %s | %s | %.0f | %.2f | %.2f | %.1f | %s | %s |\n", r.Lib.Name, r.opsPerSec(), lo, hi,
				ratio(r.opsPerSec()/best.opsPerSec()), one, ms(r.Wait.q(0.5)), ms(r.Wait.q(0.99)),
				r.Allocs, r.clientPerAcq(), r.redisPerAcq(), r.redisCPUPerAcq(), connsCell(r), top(r.Redis, r.AllAcqs, 8))
		}
		p("\n**What the numbers mean.** As on one server, every row pays two round trips per acquire + release; a cluster client adds its slot lookup and per-node pools. ")
		if lg := findRun(rs, "lockgen"); lg != nil {
			p("lockgen makes %s the ops/s of the best peer (%s), %.1f Redis commands per cycle against %.1f. ",
				ratio(lg.opsPerSec()/best.opsPerSec()), best.Lib.Name, lg.redisPerAcq(), best.redisPerAcq())
		}
		p("*× one server* is the row's ops/s here against its own in scenario 1 of this run (– when scenario 1 did not run). ops/s is the median of %d interleaved windows; connections are the most any window's process held.%s\n\n", len(rs[0].Windows), uncontendedErrors(rs))
	}

	for _, w := range res.Cfg.clusterWorkers {
		rs := withWorkers(cr.Contention, w)
		if len(rs) == 0 {
			continue
		}
		single, _ := res.contentionAt(w)
		p("### 9b. One key, %d workers, one process (scenario 2's loop)\n\n", w)
		p("Each worker waits, holds ~200 µs (spun), releases, works ~1 ms; %v per row. *× one server* is the row's acq/s against its own in scenario 2 at %d workers in this run.\n\n", rs[0].Shape.Dur, w)
		res.clusterTable(b, rs, single, false)
	}
	for _, w := range res.Cfg.shapeWorkers {
		rs := withWorkers(cr.Procs, w)
		if len(rs) == 0 {
			continue
		}
		p("### 9c. One key, %d workers over %d processes (scenario 8's loop)\n\n", w, rs[0].Shape.Procs)
		p("The hold is slept (`time.Sleep(200µs)`); each process has its own cluster client; %v per row. *× one server* is against the row's own acq/s in scenario 8 at %d workers in this run. connections: one figure per process.\n\n", rs[0].Shape.Dur, w)
		res.clusterTable(b, rs, withWorkers(res.Procs, w), true)
	}
	if rs := cr.ManyKeys; len(rs) > 0 {
		s := rs[0].Shape
		p("### 9d. Many keys: %s keys, %d goroutines on each\n\n", thousands(s.Keys), s.Workers/s.Keys)
		p("%d workers in one process; worker w always takes key w mod %d, so two goroutines contend on each key, and the keys' slots spread over every master. Hold ~200 µs (slept), think ~1 ms; %v per row.\n\n", s.Workers, s.Keys, s.Dur)
		best := bestPeer(rs, byRate)
		if best == nil {
			best = rs[0]
		}
		p("| Row | acq/s | × best peer | wait p50 | wait p99 | wait max | fairness | Redis cmds/acq | client calls/acq | client CPU µs/acq | Redis CPU µs/acq | violations | give-ups | errors | connections |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, r := range rs {
			p("| %s | %.0f | %s | %s | %s | %s | %.2f | %.1f | %.1f | %.0f | %.0f | %d | %d | %d | %s |\n", r.Lib.Name, r.rate(), ratio(r.rate()/best.rate()),
				ms(r.Wait.q(0.5)), ms(r.Wait.q(0.99)), ms(r.Wait.max()), r.Fairness, r.redisPerAcq(), r.clientPerAcq(),
				r.clientCPUPerAcq(), r.redisCPUPerAcq(), r.Violations, r.Giveups, r.Errors, connsCell(r))
		}
		p("\n**What the numbers mean.** %d goroutines on 2 cores keep the box busy, so acq/s and the waits measure what each acquisition costs the client and the three servers (the CPU columns) more than hand-off speed. ", s.Workers)
		if lg := findRun(rs, "lockgen"); lg != nil {
			bw := bestPeer(rs, byWaitP99)
			if bw == nil {
				bw = best
			}
			p("lockgen makes %s the acquisitions/s of %s (fairness %.2f against its %.2f: a fairness near 0 means some goroutines got the lock rarely or never), wait p99 %s against %s (%s), CPU per acquisition (client + Redis) %.0f µs against %.0f µs. ",
				ratio(lg.rate()/best.rate()), best.Lib.Name, lg.Fairness, best.Fairness, ms(lg.Wait.q(0.99)), ms(bw.Wait.q(0.99)), bw.Lib.Name, lg.cpuPerAcq(), best.cpuPerAcq())
			if len(lg.Conns) > 0 {
				p("Its waiters, on up to %s keys in as many slots over %d masters, shared %d pub/sub connection(s) as the window ended (issue #25 item 1: one per master, not per slot). ", thousands(s.Keys), len(res.Cluster.Addrs), lg.Conns[0].PubSub)
			}
		}
		p("%s %s\n\n", connsVerdict(rs), byCommand(rs))
	}
}

// clusterTable writes one one-key table of scenario 9 (9b or 9c); single
// are the same shape's rows on the single server, for the × one server
// column (may be empty).
func (res *results) clusterTable(b *strings.Builder, rs, single []*run, slept bool) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	best := bestPeer(rs, byRate)
	if best == nil {
		best = rs[0]
	}
	p("| Row | acq/s | × best peer | × one server | wait p50 | wait p99 | wait max | idle gap p50 | idle gap p99 | fairness | barged | mean hold | Redis cmds/acq | client calls/acq | client CPU µs/acq | Redis CPU µs/acq | violations | give-ups | errors | connections |\n")
	p("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		one := "–"
		if s := findRun(single, r.Lib.Name); s != nil {
			one = ratio(r.rate() / s.rate())
		}
		p("| %s | %.0f | %s | %s | %s | %s | %s | %s | %s | %.2f | %.0f%% | %s | %.1f | %.1f | %.0f | %.0f | %d | %d | %d | %s |\n",
			r.Lib.Name, r.rate(), ratio(r.rate()/best.rate()), one,
			ms(r.Wait.q(0.5)), ms(r.Wait.q(0.99)), ms(r.Wait.max()),
			ms(r.Gap.q(0.5)), ms(r.Gap.q(0.99)), r.Fairness, 100*float64(r.Barged)/float64(max(r.Handoffs, 1)), ms(r.Hold),
			r.redisPerAcq(), r.clientPerAcq(), r.clientCPUPerAcq(), r.redisCPUPerAcq(), r.Violations, r.Giveups, r.Errors, connsCell(r))
	}
	p("\n%s", verdict(rs))
	if slept {
		p(" %s", holdCost(rs))
	} else if lg := findRun(rs, "lockgen"); lg != nil {
		p(" CPU per acquisition, client + Redis: lockgen %.0f + %.0f µs, %s %.0f + %.0f µs.", lg.clientCPUPerAcq(), lg.redisCPUPerAcq(), best.Lib.Name, best.clientCPUPerAcq(), best.redisCPUPerAcq())
	}
	if lg, one := findRun(rs, "lockgen"), findRun(single, "lockgen"); lg != nil && one != nil && lg.clientPerAcq() >= 1.5*one.clientPerAcq() {
		p(" lockgen sends %.1f client calls and runs %.1f Redis commands per acquisition here, against %.1f and %.1f on one server: on a cluster its releases published and its woken waiters sent acquires of their own more often than on one server (in-script hand-offs and grants need sharded pub/sub there: runtime/internal/mutex/handoff.go).",
			lg.clientPerAcq(), lg.redisPerAcq(), one.clientPerAcq(), one.redisPerAcq())
	}
	p(" %s %s\n\n", connsVerdict(rs), byCommand(rs))
}

// byCommand lists each row's Redis commands per acquisition by command
// (commandstats, summed over the nodes).
func byCommand(rs []*run) string {
	var parts []string
	for _, r := range rs {
		parts = append(parts, fmt.Sprintf("%s: %s", r.Lib.Name, top(r.Redis, r.AllAcqs, 6)))
	}
	return "Commands per acquisition, by command (commandstats): " + strings.Join(parts, "; ") + "."
}

// connsCell is a row's connections column: one figure per process.
func connsCell(r *run) string {
	if len(r.Conns) == 0 {
		return "–"
	}
	parts := make([]string, len(r.Conns))
	for i, c := range r.Conns {
		parts[i] = c.String()
	}
	return strings.Join(parts, "; ")
}

// connsVerdict sets lockgen's connections per process against the peers'.
func connsVerdict(rs []*run) string {
	most := func(r *run) connCount { // the process with the most
		var m connCount
		for _, c := range r.Conns {
			if c.total() >= m.total() {
				m = c
			}
		}
		return m
	}
	perProc := func(r *run) int { return most(r).total() }
	lg := findRun(rs, "lockgen")
	if lg == nil || len(lg.Conns) == 0 {
		return ""
	}
	var lo, hi *run
	for _, r := range rs {
		if !r.Lib.Peer || len(r.Conns) == 0 {
			continue
		}
		if lo == nil || perProc(r) < perProc(lo) {
			lo = r
		}
		if hi == nil || perProc(r) > perProc(hi) {
			hi = r
		}
	}
	s := fmt.Sprintf("Connections per process (the most of any process): lockgen %d, %d of them pub/sub", perProc(lg), most(lg).PubSub)
	if lo != nil {
		s += fmt.Sprintf("; the peers from %d (%s) to %d (%s)", perProc(lo), lo.Lib.Name, perProc(hi), hi.Lib.Name)
	}
	return s + "."
}

func withWorkers(rs []*run, w int) []*run {
	var out []*run
	for _, r := range rs {
		if r.Shape.Workers == w {
			out = append(out, r)
		}
	}
	return out
}

// thousands writes n with a comma every three digits (1,000).
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
