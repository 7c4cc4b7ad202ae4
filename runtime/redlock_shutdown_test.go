package runtime_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/runtime"
)

// A RedLock acquisition whose try is still waiting for a node's reply
// when another goroutine shuts the shared Client down must not return a
// live hold: found by the robustness suite with goroutines sharing a
// Client (cluster run, seed 451760129: p9's RedLock acquire of red:0,
// invoked 18.7 ms before a sharer's Shutdown, returned ok 2.8 ms before
// that Shutdown returned, once the paused node red2 answered; its ctx
// stayed live until its caller cancelled it 290 ms later, while two other
// owners took red:0 and the counter it guards lost updates; an
// exploratory run, 6 goroutines sharing one Client per process). The
// round had its quorum from two nodes and waited for the third; the
// Shutdown's cut ended and gave back the two parts (Holds.Cut, which ends
// the RedLock holds first, did not know this one yet), and the round then
// made a hold of them whose ctx nothing ended: partEnded ignored a part
// cut with ErrDraining. Close alone (the "close" case) already ended it,
// through the parts its nodes' Close ends with ErrClosed.
func TestSharedClientRedLockAcquiredDuringShutdownIsNotLive(t *testing.T) {
	for _, how := range []string{"shutdown", "close"} {
		t.Run(how, func(t *testing.T) {
			servers := redistest.StartN(t, 3)
			var nodes []redis.UniversalClient
			for _, s := range servers {
				rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
				t.Cleanup(func() { _ = rdb.Close() })
				nodes = append(nodes, rdb)
			}
			c, err := runtime.NewClient(nodes[0], &runtime.Options{RedLockNodes: nodes, ReleaseTimeout: time.Second, WatchdogTimeout: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			other, err := runtime.NewClient(nodes[0], &runtime.Options{RedLockNodes: nodes, ReleaseTimeout: time.Second, WatchdogTimeout: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()

			// A goroutine sharing the Client holds another lock (of each
			// kind of hold Shutdown cuts): Shutdown's ctx ends before it
			// is released, so Shutdown cuts what is held.
			if _, err := c.Mutex("re:0", runtime.LockOptions{}).TryLock(context.Background(), 0, runtime.Watchdog); err != nil {
				t.Fatal(err)
			}
			if _, err := c.RedLock("red:1", runtime.LockOptions{}).TryLock(context.Background(), 0, runtime.Watchdog); err != nil {
				t.Fatal(err)
			}

			// The third node does not answer for 350 ms, and then answers
			// that someone else holds red:0 there: a try's call to it
			// waits, the other two grant the lock (a quorum of 2).
			if err := nodes[2].HSet(context.Background(), "red:0", "someone-else:1", 1).Err(); err != nil {
				t.Fatal(err)
			}
			nodes[2].PExpire(context.Background(), "red:0", 10*time.Second)
			resume := servers[2].Freeze()
			type res struct {
				h   context.Context
				err error
				at  time.Time
			}
			done := make(chan res, 1)
			go func() {
				h, err := c.RedLock("red:0", runtime.LockOptions{}).TryLock(context.Background(), 2*time.Second, 1500*time.Millisecond)
				done <- res{h, err, time.Now()}
			}()
			time.Sleep(50 * time.Millisecond)
			// A goroutine sharing the Client shuts it down (or closes it).
			shut := make(chan error, 1)
			go func() {
				if how == "close" {
					shut <- c.Close()
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
				defer cancel()
				shut <- c.Shutdown(ctx)
			}()
			time.Sleep(350 * time.Millisecond)
			resume()
			r := <-done
			t.Logf("%s: TryLock returned %v after the node resumed", how, r.err)
			<-shut
			if r.err != nil {
				if !errors.Is(r.err, runtime.ErrDraining) && !errors.Is(r.err, runtime.ErrClosed) {
					t.Errorf("TryLock on a Client shut down meanwhile: %v, want ErrDraining or ErrClosed", r.err)
				}
				return
			}
			// It returned a hold. While its ctx is live the lock must be
			// held on a quorum (2 of 3), or another owner may take it.
			t.Logf("at its return: ctx %v (%v); nodes of this owner holding red:0: %d", r.h.Err(), context.Cause(r.h), holdersOf(nodes[:2], "red:0"))
			for end := time.Now().Add(time.Second); time.Now().Before(end) && r.h.Err() == nil; time.Sleep(5 * time.Millisecond) {
				if n := holdersOf(nodes[:2], "red:0"); n < 2 && r.h.Err() == nil {
					t.Fatalf("%v after TryLock returned ok on a Client closed meanwhile, its ctx is live but only %d of 3 nodes hold red:0: another owner can take it", time.Since(r.at).Round(time.Millisecond), n)
				}
			}
			t.Logf("ctx: %v after %v", context.Cause(r.h), time.Since(r.at).Round(time.Millisecond))
		})
	}
}

func holdersOf(nodes []redis.UniversalClient, key string) int {
	n := 0
	for _, rdb := range nodes {
		if rdb.Exists(context.Background(), key).Val() == 1 {
			n++
		}
	}
	return n
}
