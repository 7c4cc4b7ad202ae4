package runtime_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/runtimetest"
	"github.com/lockgen/lockgen/runtime"
)

// The child processes of the semaphore, latch and fencing tests (see
// runChild): each writes its results as one JSON line to stdout.

func init() {
	childRoles["semaphore-worker"] = runSemaphoreWorker
	childRoles["semaphore-holder"] = runSemaphoreHolder
	childRoles["latch-waiters"] = runLatchWaiters
	childRoles["fence-worker"] = runFenceWorker
	childRoles["fence-holder"] = runFenceHolder
}

// syncResult is what a synchronizer child reports.
type syncResult struct {
	Intervals [][2]int64 `json:"intervals,omitempty"` // critical sections, Unix ns
	Returned  []int64    `json:"returned,omitempty"`  // when each latch waiter returned, Unix ns
	Tokens    [][2]int64 `json:"tokens,omitempty"`    // (acquired at Unix ns, token)
	Err       string     `json:"err,omitempty"`
}

// runSemaphoreWorker: LOCKGEN_GOROUTINES goroutines each take a permit of
// LOCKGEN_KEY LOCKGEN_ROUNDS times and record the time they held it.
func runSemaphoreWorker(c *runtime.Client, _ *redis.Client) int {
	s := c.Semaphore(os.Getenv("LOCKGEN_KEY"), runtime.SemaphoreOptions{Permits: envInt("LOCKGEN_PERMITS", 0), WaitTime: runtime.Forever})
	var (
		mu  sync.Mutex
		res syncResult
		wg  sync.WaitGroup
	)
	for g := 0; g < envInt("LOCKGEN_GOROUTINES", 0); g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < envInt("LOCKGEN_ROUNDS", 0); i++ {
				err := s.Do(context.Background(), func(ctx context.Context) error {
					start := time.Now()
					time.Sleep(time.Millisecond)
					end := time.Now()
					mu.Lock()
					res.Intervals = append(res.Intervals, [2]int64{start.UnixNano(), end.UnixNano()})
					mu.Unlock()
					return ctx.Err()
				})
				if err != nil {
					mu.Lock()
					res.Err = err.Error()
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	_ = json.NewEncoder(os.Stdout).Encode(res)
	return 0
}

// runSemaphoreHolder takes a permit of LOCKGEN_KEY, says "held", and keeps
// it (renewed by its watchdog) until killed.
func runSemaphoreHolder(c *runtime.Client, _ *redis.Client) int {
	s := c.Semaphore(os.Getenv("LOCKGEN_KEY"), runtime.SemaphoreOptions{Permits: envInt("LOCKGEN_PERMITS", 0)})
	if _, err := s.Acquire(context.Background(), 1); err != nil {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Println("held")
	select {}
}

// runLatchWaiters starts LOCKGEN_WAITERS waiters on the latch LOCKGEN_KEY,
// says "waiting" once its pub/sub subscription is up, and reports when
// each returned.
func runLatchWaiters(c *runtime.Client, _ *redis.Client) int {
	l := c.Latch(os.Getenv("LOCKGEN_KEY"), runtime.LatchOptions{})
	n := envInt("LOCKGEN_WAITERS", 0)
	var (
		mu  sync.Mutex
		res syncResult
		wg  sync.WaitGroup
	)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := l.Await(ctx)
			at := time.Now().UnixNano()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				res.Err = err.Error()
				return
			}
			res.Returned = append(res.Returned, at)
		}()
	}
	fmt.Println("waiting")
	wg.Wait()
	_ = json.NewEncoder(os.Stdout).Encode(res)
	return 0
}

// runFenceWorker takes the fenced lock LOCKGEN_KEY LOCKGEN_ROUNDS times,
// re-entering it once each time, and reports every token it got.
func runFenceWorker(c *runtime.Client, _ *redis.Client) int {
	f := c.FencedLock(os.Getenv("LOCKGEN_KEY"), runtime.LockOptions{})
	var res syncResult
	for i := 0; i < envInt("LOCKGEN_ROUNDS", 0); i++ {
		ctx, outer, err := f.LockFenced(context.Background())
		if err != nil {
			res.Err = err.Error()
			break
		}
		at := time.Now().UnixNano()
		inner, nested, err := f.TryLockFenced(ctx, 0, runtime.Watchdog)
		if err != nil {
			res.Err = err.Error()
			break
		}
		res.Tokens = append(res.Tokens, [2]int64{at, outer}, [2]int64{at + 1, nested})
		if got, _ := runtime.Fence(inner); got != nested {
			res.Err = fmt.Sprintf("Fence(inner ctx) = %d, LockFenced returned %d", got, nested)
		}
		_ = f.Unlock(inner)
		if got, _ := runtime.Fence(ctx); got != outer {
			res.Err = fmt.Sprintf("Fence(outer ctx) = %d, LockFenced returned %d", got, outer)
		}
		_ = f.Unlock(ctx)
	}
	_ = json.NewEncoder(os.Stdout).Encode(res)
	return 0
}

// runFenceHolder takes LOCKGEN_KEY (fenced unless LOCKGEN_FENCED=0), says
// "held <token>", waits for a line on stdin, then says "write <token>":
// the write a holder that checked its lock and was then paused sends when
// it resumes, whatever its ctx says by then.
func runFenceHolder(c *runtime.Client, _ *redis.Client) int {
	key := os.Getenv("LOCKGEN_KEY")
	var token int64
	if os.Getenv("LOCKGEN_FENCED") == "0" {
		if _, err := c.Mutex(key, runtime.LockOptions{}).Lock(context.Background()); err != nil {
			fmt.Println("error:", err)
			return 1
		}
	} else {
		var err error
		if _, token, err = c.FencedLock(key, runtime.LockOptions{}).LockFenced(context.Background()); err != nil {
			fmt.Println("error:", err)
			return 1
		}
	}
	fmt.Println("held", token)
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	fmt.Println("write", token)
	return 0
}

// startChildIO is startChild with the child's stdin.
func startChildIO(t *testing.T, role string, env ...string) (*exec.Cmd, *bufio.Reader, func(string)) {
	t.Helper()
	cmd := runtimetest.ChildCmd(role, env...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out := runtimetest.Start(t, cmd)
	return cmd, out, func(line string) { _, _ = in.Write([]byte(line + "\n")) }
}

// readResult reads a child's JSON result and waits for it to exit.
func readResult(t *testing.T, cmd *exec.Cmd, out *bufio.Reader) syncResult {
	t.Helper()
	line, err := out.ReadBytes('\n')
	if err != nil {
		t.Fatalf("child output %q: %v", line, err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v: %s", err, line)
	}
	var res syncResult
	if err := json.Unmarshal(line, &res); err != nil {
		t.Fatalf("child output %q: %v", line, err)
	}
	if res.Err != "" {
		t.Fatalf("child: %s", res.Err)
	}
	return res
}

// maxConcurrent is the largest number of intervals that overlap at once.
func maxConcurrent(iv [][2]int64) int {
	type edge struct {
		at    int64
		delta int
	}
	var edges []edge
	for _, x := range iv {
		edges = append(edges, edge{x[0], 1}, edge{x[1], -1})
	}
	// At a tie an end goes first: touching intervals do not overlap.
	slices.SortFunc(edges, func(a, b edge) int {
		if a.at != b.at {
			if a.at < b.at {
				return -1
			}
			return 1
		}
		return a.delta - b.delta
	})
	n, most := 0, 0
	for _, e := range edges {
		n += e.delta
		most = max(most, n)
	}
	return most
}
