package lua_test

import (
	"context"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/lua"
)

// BenchmarkRenewBatchRedisCPU is what a renewal costs Redis, alone: the
// server's CPU time (INFO cpu) per hold renewed by renew_batch.lua in
// batches of MaxBatch, next to the floor of a script that only PEXPIREs
// each key; the keys in the order they were written, then in random
// order (each key a cache miss). The number of lock hashes is
// LOCKGEN_RENEW_KEYS (default 100,000):
//
//	go test -run '^$' -bench RenewBatchRedisCPU -benchtime 1x ./lua
func BenchmarkRenewBatchRedisCPU(b *testing.B) {
	n := 100000
	if v, err := strconv.Atoi(os.Getenv("LOCKGEN_RENEW_KEYS")); err == nil {
		n = v
	}
	rdb := redistest.Start(b).Client(b)
	ctx := context.Background()
	const field = "0f2b5a3e-7b1c-4c2e-9a8d-1e2f3a4b5c6d:123456"
	keys := make([]string, n)
	p := rdb.Pipeline()
	for i := range keys {
		keys[i] = "renew:" + strconv.Itoa(i)
		p.HSet(ctx, keys[i], field, 1)
		p.PExpire(ctx, keys[i], time.Hour)
		if i%1000 == 999 {
			if _, err := p.Exec(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	if _, err := p.Exec(ctx); err != nil {
		b.Fatal(err)
	}
	floor := redis.NewScript("for k = 1, #KEYS do redis.call('pexpire', KEYS[k], ARGV[1]) end return 1")
	// Each pass renews to a lease longer than the TTL every key has, as
	// the watchdog does (a third of it has run out): a lease shorter than
	// the keys' TTL would measure PEXPIRE ... GT refusing to shorten, which
	// writes nothing.
	lease := time.Hour
	next := func() int64 { lease += time.Second; return lease.Milliseconds() }
	renew := func(batch []string, lease int64) *redis.Cmd {
		args := []any{lease, ""}
		for range batch {
			args = append(args, field)
		}
		return lua.RenewBatch.Run(ctx, rdb, batch, args...)
	}
	pexpire := func(batch []string, lease int64) *redis.Cmd { return floor.Run(ctx, rdb, batch, lease) }
	for b.Loop() {
		// In the order the keys were written (a watchdog renews holds
		// taken together together), then in random order.
		b.ReportMetric(renewCPU(b, rdb, keys, renew, next()), "redis-µs/hold")
		b.ReportMetric(renewCPU(b, rdb, keys, pexpire, next()), "floor-redis-µs/hold")
		shuffled := slices.Clone(keys)
		rand.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		b.ReportMetric(renewCPU(b, rdb, shuffled, renew, next()), "random-redis-µs/hold")
		b.ReportMetric(renewCPU(b, rdb, shuffled, pexpire, next()), "random-floor-redis-µs/hold")
	}
}

// renewCPU runs send over keys in batches of MaxBatch, each with lease
// (ms), and returns the server's CPU time per key, in µs.
func renewCPU(b *testing.B, rdb *redis.Client, keys []string, send func([]string, int64) *redis.Cmd, lease int64) float64 {
	before := redistest.CPU(b, rdb)
	for i := 0; i < len(keys); i += lua.MaxBatch {
		if err := send(keys[i:min(i+lua.MaxBatch, len(keys))], lease).Err(); err != nil {
			b.Fatal(err)
		}
	}
	return float64((redistest.CPU(b, rdb) - before).Nanoseconds()) / 1e3 / float64(len(keys))
}
