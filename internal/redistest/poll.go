package redistest

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// pollInterval is how often the wait helpers look again: short next to the
// second or two a replica sync, cluster failover or sentinel failover takes.
const pollInterval = 50 * time.Millisecond

// waitUntil calls check until it returns nil and fails tb with the last
// error if that does not happen within timeout. Each call gets a context
// that ends with the timeout.
func waitUntil(tb testing.TB, timeout time.Duration, what string, check func(context.Context) error) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	for {
		err := check(ctx)
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			tb.Fatalf("redistest: %s: not done after %v: %v", what, time.Since(start).Round(time.Millisecond), err)
		case <-time.After(pollInterval):
		}
	}
}

// infoField returns a field of an INFO reply ("" if absent).
func infoField(info, field string) string {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

// CPU is the CPU time the server of rdb has used: INFO cpu's
// used_cpu_sys + used_cpu_user. Benchmarks read it before and after.
func CPU(tb testing.TB, rdb redis.UniversalClient) time.Duration {
	tb.Helper()
	info, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		tb.Fatal(err)
	}
	var sum float64
	for _, f := range []string{"used_cpu_sys", "used_cpu_user"} {
		v, _ := strconv.ParseFloat(infoField(info, f), 64)
		sum += v
	}
	return time.Duration(sum * float64(time.Second))
}
