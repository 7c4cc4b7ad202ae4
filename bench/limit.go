package main

import (
	"context"
	"encoding/csv"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// limitRow is one redis-benchmark measurement on the run's own Redis.
type limitRow struct {
	Command string
	Clients int
	RPS     float64
	P50     time.Duration // latency
}

// rtt is the mean round trip implied by a 1-client rate.
func (l limitRow) rtt() time.Duration { return time.Duration(float64(time.Second) / l.RPS) }

// physicalLimit is scenario 5: what Redis and loopback give on this box,
// measured with redis-benchmark (PING, and EVALSHA of a one-read script,
// the cheapest script round trip) at 1 and 50 clients.
func (b *bench) physicalLimit(bin string, n1, n50 int) ([]limitRow, error) {
	sha, err := b.admin.ScriptLoad(context.Background(), "return redis.call('exists', KEYS[1])").Result()
	if err != nil {
		return nil, err
	}
	var rows []limitRow
	for _, c := range []struct {
		name string
		args []string
	}{
		{"PING", []string{"PING"}},
		{"EVALSHA", []string{"EVALSHA", sha, "1", "bench:limit"}},
	} {
		for _, clients := range []int{1, 50} {
			n := n1
			if clients > 1 {
				n = n50
			}
			args := append([]string{"-h", "127.0.0.1", "-p", strconv.Itoa(b.srv.port),
				"-c", strconv.Itoa(clients), "-n", strconv.Itoa(n), "--csv"}, c.args...)
			out, err := exec.Command(bin, args...).Output()
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", bin, strings.Join(args, " "), err)
			}
			recs, err := csv.NewReader(strings.NewReader(string(out))).ReadAll()
			if err != nil || len(recs) < 2 || len(recs[1]) < 5 {
				return nil, fmt.Errorf("redis-benchmark output not understood: %q", out)
			}
			rps, _ := strconv.ParseFloat(recs[1][1], 64)
			p50, _ := strconv.ParseFloat(recs[1][4], 64)
			rows = append(rows, limitRow{Command: c.name, Clients: clients, RPS: rps,
				P50: time.Duration(p50 * float64(time.Millisecond))})
		}
	}
	return rows, nil
}
