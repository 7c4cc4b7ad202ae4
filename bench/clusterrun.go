package main

import (
	"fmt"
	"log"
	"time"
)

// clusterResults is scenario 9: scenarios 1, 2, 8 and a many-keys shape
// re-run on a local Redis Cluster of clusterMasters masters, each row on a
// *redis.ClusterClient (rueidislock: a rueidis cluster client).
type clusterResults struct {
	Addrs       []string
	Uncontended []*run
	Contention  []*run // spun hold, one process (scenario 2's loop)
	Procs       []*run // slept hold over cfg.procs processes (scenario 8's loop)
	ManyKeys    []*run // 1,000 keys, 2 goroutines pinned to each
}

// manyKeysPerKey is how many goroutines share each key in the cluster's
// many-keys shape.
const manyKeysPerKey = 2

// clusterRows are the rows that run on the cluster: lockgen's Mutex and
// every peer (all of them take a cluster client; see README.md).
func (l *lib) clusterRow() bool { return l.Kind == "mutex" }

// onCluster starts the cluster, runs scenario 9 on it with every cluster
// row of libs, and stops it.
func (b *bench) onCluster(serverBin string, libs []*lib) (*clusterResults, error) {
	t0 := time.Now()
	nodes, err := startCluster(serverBin)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, s := range nodes {
			s.stop()
		}
	}()
	be := newBackend(addrsOfServers(nodes), true)
	defer be.close()
	cb := *b
	cb.be = be
	cr := &clusterResults{Addrs: be.addrs}
	log.Printf("9. cluster of %d masters on %v, up in %v", clusterMasters, be.addrs, time.Since(t0).Round(time.Millisecond))
	cfg := b.cfg

	var rows []*lib
	for _, l := range libs {
		if l.clusterRow() {
			rows = append(rows, l)
		}
	}
	const rounds = 30
	byLib := make(map[*lib][]*run)
	for i := range rounds {
		if i%10 == 0 {
			log.Printf("9. cluster: uncontended, rounds %d–%d of %d", i+1, min(i+10, rounds), rounds)
		}
		for _, l := range rows {
			byLib[l] = append(byLib[l], cb.uncontended(l, cfg.uncontended/rounds))
		}
	}
	for _, l := range rows {
		cr.Uncontended = append(cr.Uncontended, merge(byLib[l]))
	}
	be.flush()

	for _, w := range cfg.clusterWorkers {
		for _, l := range rows {
			log.Printf("9. cluster: contention, %d workers: %s", w, l.Name)
			s := shape{Workers: w, Keys: 1, Hold: 200 * time.Microsecond, SpinHold: true, Think: time.Millisecond, Dur: cfg.contention}
			r := cb.contend(l, s, fmt.Sprintf("k%d:%s", w, l.Name))
			cr.Contention = append(cr.Contention, r)
			log.Printf("   %.0f acq/s, wait p99 %v, gap p99 %v, fairness %.2f, conns %v, %d violations",
				r.rate(), r.Wait.q(0.99), r.Gap.q(0.99), r.Fairness, r.Conns, r.Violations)
		}
		be.flush()
	}
	for _, w := range cfg.shapeWorkers {
		for _, l := range rows {
			log.Printf("9. cluster: sleeping hold, %d workers in %d processes: %s", w, cfg.procs, l.Name)
			s := shape{Workers: w, Keys: 1, Hold: 200 * time.Microsecond, Think: time.Millisecond, Dur: cfg.contention, Procs: cfg.procs}
			r := cb.contend(l, s, fmt.Sprintf("kp%d:%s", w, l.Name))
			cr.Procs = append(cr.Procs, r)
			log.Printf("   %.0f acq/s, wait p99 %v, gap p50 %v, fairness %.2f, conns %v, %d violations",
				r.rate(), r.Wait.q(0.99), r.Gap.q(0.5), r.Fairness, r.Conns, r.Violations)
		}
		be.flush()
	}
	for _, l := range rows {
		log.Printf("9. cluster: many keys, %d keys × %d goroutines: %s", cfg.clusterKeys, manyKeysPerKey, l.Name)
		s := shape{Workers: manyKeysPerKey * cfg.clusterKeys, Keys: cfg.clusterKeys, PinKeys: true,
			Hold: 200 * time.Microsecond, Think: time.Millisecond, Dur: cfg.manyKeys}
		r := cb.contend(l, s, "km:"+l.Name)
		cr.ManyKeys = append(cr.ManyKeys, r)
		log.Printf("   %.0f acq/s, wait p99 %v, conns %v, %d violations, %d errors",
			r.rate(), r.Wait.q(0.99), r.Conns, r.Violations, r.Errors)
		be.flush()
	}
	return cr, nil
}
