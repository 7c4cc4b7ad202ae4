package scripts_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/runtime/internal/scripts"
)

// Calls run aside (a client without ContextTimeoutEnabled) are pooled
// unless abandoned: every outcome, in time or late (Then), is the call's
// own, even while abandoned calls and calls answered in time interleave
// on reused pool entries (a late outcome never lands in a reused one).
func TestCallsAsideKeepTheirOwnOutcomeAcrossThePool(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 64}) // ContextTimeoutEnabled off
	t.Cleanup(func() { _ = rdb.Close() })
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	admin := srv.Client(t)
	stop := make(chan struct{})
	var pauses sync.WaitGroup
	pauses.Add(1)
	go func() { // the server stalls now and then: some calls are abandoned
		defer pauses.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(60 * time.Millisecond):
			}
			_ = admin.Do(ctx, "client", "pause", 40, "all").Err()
		}
	}()
	var abandoned, inTime, late atomic.Int64
	var lateWG sync.WaitGroup
	var workers sync.WaitGroup
	until := time.Now().Add(2 * time.Second)
	for w := range 8 {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for i := 0; time.Now().Before(until); i++ {
				want := fmt.Sprintf("w%d-%d", w, i)
				cctx, cancel := context.WithTimeout(ctx, time.Duration(2+rand.IntN(30))*time.Millisecond)
				var cmd *redis.Cmd
				if i%2 == 0 {
					cmd = scripts.Do(cctx, rdb, "echo", want)
				} else {
					cmd = scripts.LatchTrySet.Run(cctx, rdb, 2, []any{scripts.Header: "latch:" + want, "ch", want, "publish"})
				}
				cancel()
				check := func(cmd *redis.Cmd, when string) {
					if cmd.Err() != nil {
						return
					}
					got := fmt.Sprint(cmd.Val())
					if i%2 == 0 && got != want || i%2 == 1 && got != "1" {
						t.Errorf("%s outcome of %s: %q", when, want, got)
					}
				}
				if p := scripts.Abandoned(cmd.Err()); p != nil {
					abandoned.Add(1)
					lateWG.Add(1)
					p.Then(func(cmd *redis.Cmd) {
						defer lateWG.Done()
						late.Add(1)
						check(cmd, "late")
					})
					continue
				}
				inTime.Add(1)
				check(cmd, "in-time")
			}
		}()
	}
	workers.Wait()
	close(stop)
	pauses.Wait()
	done := make(chan struct{})
	go func() { lateWG.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%d late outcomes of %d abandoned calls came", late.Load(), abandoned.Load())
	}
	t.Logf("%d calls answered in time, %d abandoned (all outcomes came)", inTime.Load(), abandoned.Load())
	if abandoned.Load() == 0 {
		t.Error("no call was abandoned: the test proves nothing")
	}
}
