package runtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime"
)

// The soak: 4 processes × 16 goroutines on a handful of keys of every
// exclusive kind and a read-write lock, with random holds, waits that are
// cancelled (10%), one-shot TryLocks (10%) and re-entries. Every critical
// section checks exclusion in Redis itself (counters of who is inside).
// Afterwards no key may be left but those counters: no lock, no queue
// entry, no request marker (a healthy server loses no reply, so none is
// ever written).

const (
	soakProcs      = 4
	soakGoroutines = 16
	soakKeys       = 3 // per kind
)

type soakResult struct {
	Acquired  int64    `json:"acquired"`
	Cancelled int64    `json:"cancelled"`
	Missed    int64    `json:"missed"` // TryLocks that found the lock taken
	Overlaps  []string `json:"overlaps,omitempty"`
	Err       string   `json:"err,omitempty"`
}

func TestSoakManyProcessesLeaveNothingBehind(t *testing.T) {
	skipShortOutsideCI(t)
	d := 60 * time.Second
	if v := os.Getenv("LOCKGEN_SOAK"); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			t.Fatal(err)
		}
	}
	s, rdb, _ := setup(t, nil)
	type child struct {
		wait func() error
		out  io.Reader
	}
	var children []child
	for range soakProcs {
		cmd, out := startChild(t, "soak-worker", "LOCKGEN_ADDR="+s.Addr(), "LOCKGEN_SOAK="+d.String(), "LOCKGEN_WATCHDOG_MS=2000")
		children = append(children, child{cmd.Wait, out})
	}
	var total soakResult
	for i, ch := range children {
		data, err := io.ReadAll(ch.out)
		if err != nil {
			t.Fatal(err)
		}
		if err := ch.wait(); err != nil {
			t.Fatalf("child %d: %v: %s", i, err, data)
		}
		var res soakResult
		if err := json.Unmarshal(data, &res); err != nil {
			t.Fatalf("child %d output %q: %v", i, data, err)
		}
		if res.Err != "" {
			t.Errorf("child %d: %s", i, res.Err)
		}
		total.Acquired += res.Acquired
		total.Cancelled += res.Cancelled
		total.Missed += res.Missed
		total.Overlaps = append(total.Overlaps, res.Overlaps...)
	}
	t.Logf("%v: %d acquisitions, %d cancelled waits, %d TryLocks that found the lock taken", d, total.Acquired, total.Cancelled, total.Missed)
	if len(total.Overlaps) > 0 {
		t.Errorf("%d critical sections overlapped, e.g. %s", len(total.Overlaps), total.Overlaps[0])
	}
	if total.Acquired == 0 || total.Cancelled == 0 {
		t.Errorf("the soak did not exercise what it should (acquired %d, cancelled %d)", total.Acquired, total.Cancelled)
	}
	keys, err := allKeys(context.Background(), rdb)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, k := range keys {
		if strings.HasPrefix(k, "lockgen_lock_hubs:") && rdb.PTTL(context.Background(), k).Val() > 0 {
			continue // the Clients that queued waiters lately: it expires (grant.go)
		}
		if !strings.HasPrefix(k, "soak-inside:") && !strings.HasPrefix(k, "lockgen_owner:") {
			left = append(left, k)
		}
	}
	if len(left) > 0 {
		t.Errorf("%d keys left after every process released everything: %v", len(left), left[:min(len(left), 10)])
	}
}

// runSoakWorker is a soak child: LOCKGEN_SOAK long, soakGoroutines
// goroutines, then one JSON line of soakResult.
func runSoakWorker(c *runtime.Client, rdb *redis.Client) int {
	d, _ := time.ParseDuration(os.Getenv("LOCKGEN_SOAK"))
	end := time.Now().Add(d)
	var res soakResult
	var mu sync.Mutex
	var acquired, cancelled, missed atomic.Int64
	overlap := func(format string, args ...any) {
		mu.Lock()
		if len(res.Overlaps) < 20 {
			res.Overlaps = append(res.Overlaps, fmt.Sprintf(format, args...))
		}
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for g := range soakGoroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(os.Getpid()), uint64(g)))
			for time.Now().Before(end) {
				soakRound(c, rdb, r, &acquired, &cancelled, &missed, overlap)
			}
		}()
	}
	wg.Wait()
	res.Acquired, res.Cancelled, res.Missed = acquired.Load(), cancelled.Load(), missed.Load()
	_ = json.NewEncoder(os.Stdout).Encode(res)
	return 0
}

// soakRound takes one random lock one random way and checks exclusion
// inside it.
func soakRound(c *runtime.Client, rdb *redis.Client, r *rand.Rand, acquired, cancelled, missed *atomic.Int64, overlap func(string, ...any)) {
	kinds := []string{"reentrant", "fair", "write", "read"}
	kind := kinds[r.IntN(len(kinds))]
	n := r.IntN(soakKeys)
	key := fmt.Sprintf("soak:%s:%d", kind, n)
	var m *runtime.Mutex
	inside := "soak-inside:" + key
	switch kind {
	case "reentrant":
		m = c.Mutex(key, runtime.LockOptions{})
	case "fair":
		m = c.FairLock(key, runtime.LockOptions{})
	case "write", "read":
		key = fmt.Sprintf("soak:rw:%d", n)
		inside = "soak-inside:" + key
		rw := c.ReadWrite(key, runtime.LockOptions{WritersFirst: r.IntN(2) == 0})
		m = rw.Write()
		if kind == "read" {
			m = rw.Read()
		}
	}
	lease := runtime.Watchdog
	if r.IntN(2) == 0 {
		lease = time.Duration(500+r.IntN(1500)) * time.Millisecond
	}
	ctx := context.Background()
	wait := runtime.Forever
	switch p := r.IntN(10); {
	case p == 0: // a wait that is cancelled
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(r.IntN(20000))*time.Microsecond)
		defer cancel()
	case p == 1: // one try
		wait = 0
	default:
		wait = time.Duration(50+r.IntN(500)) * time.Millisecond
	}
	hctx, err := m.TryLock(ctx, wait, lease)
	switch {
	case err == nil:
	case ctx.Err() != nil:
		cancelled.Add(1)
		return
	case wait == 0:
		missed.Add(1)
		return
	default:
		return // waited out its wait time
	}
	acquired.Add(1)
	bg := context.Background()
	// Who is inside: writers count in field w, readers in field r.
	if kind == "read" {
		rdb.HIncrBy(bg, inside, "r", 1)
		if w, _ := rdb.HGet(bg, inside, "w").Int(); w != 0 {
			overlap("%s: a reader inside with %d writers", key, w)
		}
	} else if w := rdb.HIncrBy(bg, inside, "w", 1).Val(); w != 1 {
		overlap("%s: %d owners inside", key, w)
	} else if rd, _ := rdb.HGet(bg, inside, "r").Int(); rd != 0 {
		overlap("%s: a writer inside with %d readers", key, rd)
	}
	time.Sleep(time.Duration(r.IntN(3000)) * time.Microsecond)
	if r.IntN(5) == 0 { // a re-entry with the hold's ctx
		if inner, err := m.TryLock(hctx, 0, lease); err == nil {
			_ = m.Unlock(inner)
		}
	}
	if kind == "read" {
		rdb.HIncrBy(bg, inside, "r", -1)
	} else {
		rdb.HIncrBy(bg, inside, "w", -1)
	}
	if err := m.Unlock(hctx); err != nil && hctx.Err() == nil {
		overlap("%s: unlock of a live hold failed: %v", key, err)
	}
}
