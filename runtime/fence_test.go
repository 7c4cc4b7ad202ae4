package runtime_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lockgen/lockgen/runtime"
)

func TestFencingTokensStrictlyIncreaseAcrossProcessesAndReentries(t *testing.T) {
	t.Parallel() // servers of its own; it checks counts and order, not times
	s, rdb, c := setup(t, nil)
	const procs, rounds = 4, 40
	var (
		mu  sync.Mutex
		all [][2]int64
		wg  sync.WaitGroup
	)
	for i := 0; i < procs; i++ {
		cmd, out := startChild(t, "fence-worker", "LOCKGEN_ADDR="+s.Addr(), "LOCKGEN_KEY=ledger:1", "LOCKGEN_ROUNDS="+strconv.Itoa(rounds))
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := readResult(t, cmd, out)
			// Within a process, in acquisition order, every token is
			// higher than the one before (re-entries included).
			for j := 1; j < len(res.Tokens); j++ {
				if res.Tokens[j][1] <= res.Tokens[j-1][1] {
					t.Errorf("token %d after %d in one process", res.Tokens[j][1], res.Tokens[j-1][1])
				}
			}
			mu.Lock()
			all = append(all, res.Tokens...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	// Across processes, ordered by when they were acquired, tokens strictly
	// increase, and every acquisition got its own.
	slices.SortFunc(all, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	for j := 1; j < len(all); j++ {
		if all[j][1] <= all[j-1][1] {
			t.Fatalf("token %d acquired after token %d", all[j][1], all[j-1][1])
		}
	}
	if want := int64(procs * rounds * 2); all[len(all)-1][1] != want {
		t.Fatalf("last token %d, want %d (one per acquisition)", all[len(all)-1][1], want)
	}
	if got, _ := c.FencedLock("ledger:1", runtime.LockOptions{}).Token(ctxT(t)); got != int64(procs*rounds*2) {
		t.Fatalf("Token = %d", got)
	}
	if ttl, _ := rdb.PTTL(ctxT(t), "redisson_lock_token:{ledger:1}").Result(); ttl != -1 {
		t.Fatalf("token counter TTL %v, want none", ttl)
	}
}

// storage is the resource a lock guards, as the fencing pattern wants it:
// with fencing it refuses a write whose token is lower than the highest it
// has seen.
type storage struct {
	mu      sync.Mutex
	fenced  bool
	highest int64
	value   string
}

func (s *storage) write(token int64, value string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fenced {
		if token < s.highest {
			return fmt.Errorf("token %d is older than %d: write refused", token, s.highest)
		}
		s.highest = token
	}
	s.value = value
	return nil
}

// TestFencingRejectsAPausedHoldersWrite is the reason fencing exists: a
// holder paused (SIGSTOP) past its lease loses the lock to the next owner
// without knowing it; when it resumes it writes with its old token, and
// only a fenced storage refuses that write.
func TestFencingRejectsAPausedHoldersWrite(t *testing.T) {
	skipShortOutsideCI(t)
	for _, fenced := range []bool{true, false} {
		t.Run(map[bool]string{true: "fenced", false: "unfenced"}[fenced], func(t *testing.T) {
			const lease = 500 * time.Millisecond
			s, _, c := setup(t, &runtime.Options{WatchdogTimeout: lease})
			flag := map[bool]string{true: "1", false: "0"}[fenced]
			cmd, out, send := startChildIO(t, "fence-holder", "LOCKGEN_ADDR="+s.Addr(), "LOCKGEN_KEY=ledger:9", "LOCKGEN_WATCHDOG_MS=500", "LOCKGEN_FENCED="+flag)
			line, err := out.ReadString('\n')
			if err != nil || !strings.HasPrefix(line, "held ") {
				t.Fatalf("child: %q %v", line, err)
			}
			store := &storage{fenced: fenced}
			// A is paused: its watchdog stops with it, its lease runs out.
			if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			// B takes the lock once the lease ran out, and writes.
			var bToken int64
			write := func(ctx context.Context) error {
				return store.write(bToken, "B")
			}
			if fenced {
				f := c.FencedLock("ledger:9", runtime.LockOptions{WaitTime: 5 * time.Second})
				err = f.DoFenced(ctxT(t), func(ctx context.Context, fence int64) error {
					bToken = fence
					return write(ctx)
				})
			} else {
				err = c.Mutex("ledger:9", runtime.LockOptions{WaitTime: 5 * time.Second}).Do(ctxT(t), write)
			}
			if err != nil {
				t.Fatalf("B: %v", err)
			}
			// A resumes and sends the write it prepared before the pause.
			if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			send("go")
			line, err = out.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			aToken, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(line, "write ")), 10, 64)
			werr := store.write(aToken, "A")
			switch {
			case fenced && werr == nil:
				t.Fatalf("the paused holder's write (token %d, after B's %d) was accepted: %s", aToken, bToken, store.value)
			case fenced:
				t.Logf("A (token %d) refused after B (token %d): %v", aToken, bToken, werr)
			case werr != nil || store.value != "A":
				t.Fatalf("without fencing the stale write should land: %v %q", werr, store.value)
			default:
				t.Logf("without fencing A's stale write overwrote B's: the storage holds %q", store.value)
			}
		})
	}
}

func TestFenceReadsTheTokenFromAHoldCtx(t *testing.T) {
	_, _, c := setup(t, nil)
	ctx := ctxT(t)
	if _, ok := runtime.Fence(ctx); ok {
		t.Fatal("a plain ctx has a token")
	}
	m := c.Mutex("plain", runtime.LockOptions{})
	h, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := runtime.Fence(h); ok {
		t.Fatal("an unfenced hold has a token")
	}
	f := c.FencedLock("fenced", runtime.LockOptions{})
	fh, tok, err := f.LockFenced(h)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := runtime.Fence(fh); !ok || got != tok || tok != 1 {
		t.Fatalf("Fence = %d %v, LockFenced returned %d", got, ok, tok)
	}
	// A ctx derived from the hold carries it; the outer unfenced hold not.
	inner, cancel := context.WithCancel(fh)
	defer cancel()
	if got, _ := runtime.Fence(inner); got != tok {
		t.Fatalf("Fence(derived) = %d", got)
	}
	_ = f.Unlock(fh)
	_ = m.Unlock(h)
	if err := f.DoFenced(ctx, nil); !errors.Is(err, runtime.ErrInvalidArgument) {
		t.Fatalf("DoFenced(nil): %v", err)
	}
}

func TestFencedAcquireAndReleaseAreTwoCommands(t *testing.T) {
	e, counter := setupCounted(t, nil)
	f := e.c.FencedLock("counted", runtime.LockOptions{})
	ctx := ctxT(t)
	// Load the scripts first: a cold cache costs a SCRIPT LOAD once.
	h, err := f.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = f.Unlock(h)
	counter.start()
	h, err = f.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Unlock(h); err != nil {
		t.Fatal(err)
	}
	if n := counter.n.Load(); n != 2 {
		t.Fatalf("%d commands for a fenced acquire + release, want 2", n)
	}
}
