package runtime_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/internal/runtimetest"
	"github.com/lockgen/lockgen/runtime"
)

const (
	fairQueue    = "redisson_lock_queue:{fair}"
	fairTimeouts = "redisson_lock_timeout:{fair}"
)

// runFairWaiters is the child role "fair-waiters": every line on stdin is
// a waiter id; each waiter takes the fair lock, appends its id to the list
// "order", holds briefly and releases. It prints "done" when stdin closes
// and every waiter has finished.
func runFairWaiters(c *runtime.Client, rdb redis.UniversalClient) int {
	ctx := context.Background()
	var wg sync.WaitGroup
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		id := sc.Text()
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fairWaiter(ctx, c, rdb, id); err != nil {
				fmt.Println("error:", err)
			}
		}()
	}
	wg.Wait()
	fmt.Println("done")
	return 0
}

func fairWaiter(ctx context.Context, c *runtime.Client, rdb redis.UniversalClient, id string) error {
	m := c.FairLock("fair", runtime.LockOptions{QueueTimeout: fairQueueTimeout()})
	h, err := m.Lock(ctx)
	if err != nil {
		return err
	}
	rdb.RPush(ctx, "order", id)
	time.Sleep(2 * time.Millisecond)
	return m.Unlock(h)
}

func fairQueueTimeout() time.Duration {
	ms, _ := strconv.Atoi(os.Getenv("LOCKGEN_QUEUE_TIMEOUT_MS"))
	return time.Duration(ms) * time.Millisecond
}

func TestFairLockGrantsInArrivalOrderAcrossProcesses(t *testing.T) {
	s, rdb, c := setup(t, nil)
	ctx := ctxT(t)
	holder := c.FairLock("fair", runtime.LockOptions{})
	h, err := holder.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	child := runtimetest.ChildCmd("fair-waiters", "LOCKGEN_ADDR="+s.Addr())
	stdin, _ := child.StdinPipe()
	stdout, _ := child.StdoutPipe()
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })

	const waiters = 20
	var wg sync.WaitGroup
	for i := 0; i < waiters; i++ {
		id := strconv.Itoa(i)
		if i%2 == 0 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := fairWaiter(ctx, c, rdb, id); err != nil {
					t.Error(err)
				}
			}()
		} else {
			fmt.Fprintln(stdin, id)
		}
		// Arrival order is queue order: let waiter i queue before i+1 comes.
		eventually(t, 5*time.Second, "waiter "+id+" queued", func() bool {
			return rdb.LLen(ctx, fairQueue).Val() == int64(i+1)
		})
	}
	if err := holder.Unlock(h); err != nil {
		t.Fatal(err)
	}
	stdin.Close()
	wg.Wait()
	out, _ := io.ReadAll(stdout)
	if !strings.Contains(string(out), "done") || strings.Contains(string(out), "error") {
		t.Fatalf("child: %s", out)
	}
	order, _ := rdb.LRange(ctx, "order", 0, -1).Result()
	want := make([]string, waiters)
	for i := range want {
		want[i] = strconv.Itoa(i)
	}
	if strings.Join(order, ",") != strings.Join(want, ",") {
		t.Fatalf("acquisition order %v, want %v", order, want)
	}
	if left := keysLeft(t, rdb); len(left) != 1 || left[0] != "order" {
		t.Fatalf("keys left: %v", left)
	}
}

func TestFairLockSkipsCrashedWaiterAfterQueueTimeout(t *testing.T) {
	skipShortOutsideCI(t)
	const queueTimeout = time.Second
	s, rdb, c := setup(t, nil)
	ctx := ctxT(t)
	opts := runtime.LockOptions{QueueTimeout: queueTimeout}
	holder := c.FairLock("fair", opts)
	h, _ := holder.Lock(ctx)

	child := runtimetest.ChildCmd("fair-waiters", "LOCKGEN_ADDR="+s.Addr(),
		"LOCKGEN_QUEUE_TIMEOUT_MS="+strconv.Itoa(int(queueTimeout.Milliseconds())))
	child.Stderr = nil
	stdin, _ := child.StdinPipe()
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	fmt.Fprintln(stdin, "dead")
	eventually(t, 5*time.Second, "child queued", func() bool { return rdb.LLen(ctx, fairQueue).Val() == 1 })

	got := make(chan time.Time, 1)
	go func() {
		m := c.FairLock("fair", opts)
		w, err := m.TryLock(ctx, 10*time.Second, runtime.Watchdog)
		if err != nil {
			t.Error(err)
			return
		}
		got <- time.Now()
		_ = m.Unlock(w)
	}()
	eventually(t, 5*time.Second, "live waiter queued behind", func() bool { return rdb.LLen(ctx, fairQueue).Val() == 2 })
	// A live waiter keeps its place for longer than the queue timeout.
	time.Sleep(queueTimeout + 300*time.Millisecond)
	if n := rdb.LLen(ctx, fairQueue).Val(); n != 2 {
		t.Fatalf("queue length %d after the queue timeout while both waiters live, want 2", n)
	}
	_ = child.Process.Kill()
	killed := time.Now()
	if err := holder.Unlock(h); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-got:
		d := at.Sub(killed)
		t.Logf("live waiter acquired %v after the queued child was killed", d)
		if d > queueTimeout+time.Second {
			t.Fatalf("took %v, want <= queueTimeout + 1s", d)
		}
	case <-time.After(queueTimeout + 5*time.Second):
		t.Fatal("the queue stayed blocked behind a crashed waiter")
	}
	eventually(t, time.Second, "queue keys cleaned", func() bool { return len(keysLeft(t, rdb)) == 0 })
}

func TestFairLockWaitersThatGiveUpLeaveNoTrace(t *testing.T) {
	_, rdb, c := setup(t, nil)
	ctx := ctxT(t)
	holder := c.FairLock("fair", runtime.LockOptions{})
	h, _ := holder.Lock(ctx)

	cctx, cancel := context.WithCancel(ctx)
	cancelled := make(chan error, 1)
	go func() {
		_, err := c.FairLock("fair", runtime.LockOptions{}).Lock(cctx)
		cancelled <- err
	}()
	eventually(t, 5*time.Second, "first queued", func() bool { return rdb.LLen(ctx, fairQueue).Val() == 1 })
	timedOut := make(chan error, 1)
	go func() {
		_, err := c.FairLock("fair", runtime.LockOptions{}).TryLock(ctx, 300*time.Millisecond, runtime.Watchdog)
		timedOut <- err
	}()
	eventually(t, 5*time.Second, "second queued", func() bool { return rdb.LLen(ctx, fairQueue).Val() == 2 })
	got := make(chan time.Time, 1)
	go func() {
		m := c.FairLock("fair", runtime.LockOptions{})
		w, err := m.TryLock(ctx, 10*time.Second, runtime.Watchdog)
		if err != nil {
			t.Error(err)
			return
		}
		got <- time.Now()
		_ = m.Unlock(w)
	}()
	eventually(t, 5*time.Second, "third queued", func() bool { return rdb.LLen(ctx, fairQueue).Val() == 3 })

	cancel()
	if err := <-cancelled; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter: %v", err)
	}
	if err := <-timedOut; !errors.Is(err, runtime.ErrNotAcquired) {
		t.Fatalf("timed-out waiter: %v", err)
	}
	// A leave gets leaveWithin in the call, then goes on in the settler:
	// a loaded box may finish it after TryLock returned.
	eventually(t, 2*time.Second, "only the third left in the queue", func() bool {
		return rdb.LLen(ctx, fairQueue).Val() == 1 && rdb.ZCard(ctx, fairTimeouts).Val() == 1
	})
	released := time.Now()
	_ = holder.Unlock(h)
	select {
	case at := <-got:
		if d := at.Sub(released); d > 2*time.Second { // those who left would hold it up for QueueTimeout (5 minutes)
			t.Fatalf("third waiter acquired %v after the release: delayed by those who left", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("third waiter never acquired")
	}
	eventually(t, time.Second, "no keys left", func() bool { return len(keysLeft(t, rdb)) == 0 })
}

func TestFairLockWakesOnlyTheHead(t *testing.T) {
	_, rdb, c := setup(t, nil)
	ctx := ctxT(t)
	holder := c.FairLock("fair", runtime.LockOptions{})
	h, _ := holder.Lock(ctx)
	sub := rdb.PSubscribe(ctx, "redisson_lock__channel:{fair}*")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := c.FairLock("fair", runtime.LockOptions{})
			w, err := m.Lock(ctx)
			if err == nil {
				_ = m.Unlock(w)
			}
		}()
		eventually(t, 5*time.Second, "queued", func() bool { return rdb.LLen(ctx, fairQueue).Val() == int64(i+1) })
	}
	head := rdb.LIndex(ctx, fairQueue, 0).Val()
	// The head takes grants once its try after its subscription was
	// confirmed recorded the lease it wants: a release before that wakes
	// it with Redisson's "0" (a clean-clone CI run released first).
	eventually(t, 5*time.Second, "the head's grant record", func() bool {
		return strings.Contains(rdb.HGet(ctx, "lockgen_fair_grants:{fair}", head).Val(), ":")
	})
	_ = holder.Unlock(h)
	msg, err := sub.ReceiveMessage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The head is a lockgen waiter: the release grants it the lock and
	// says so ("2:<its try's nonce>") on its channel only.
	if msg.Channel != "redisson_lock__channel:{fair}:"+head || !strings.HasPrefix(msg.Payload, "2:") {
		t.Fatalf("release published %q on %s, want \"2:…\" (granted) on the head's channel %s", msg.Payload, msg.Channel, head)
	}
	wg.Wait()
}

// TestFairWaitersGetAFreeLockAfterTheirQueueWasEvicted: the queue keys of
// a fair lock have no TTL, and allkeys-lru may evict them (a DEL here)
// while waiters of two Clients wait in line. The holder's release then
// finds no one to wake, and only key tracking sees the lock free: every
// waiter must still get the lock in turn, each within a few seconds, not
// after its queue deadline or the end of its wait (20 s). Client 2 has two
// waiters, so its second is woken by tracking after its first took the
// lock and left its channel, and it is missing from the queue it waits in.
func TestFairWaitersGetAFreeLockAfterTheirQueueWasEvicted(t *testing.T) {
	for _, evicted := range []string{"redisson_lock_queue", "redisson_lock_timeout"} {
		t.Run(evicted, func(t *testing.T) {
			s := redistest.Start(t)
			admin := s.Client(t)
			ctx := ctxT(t)
			c1 := newClient(t, s.Client(t), nil)
			c2 := newClient(t, s.Client(t), nil)
			c3 := newClient(t, s.Client(t), nil)
			const key = "fair:evicted"
			holder := c1.FairLock(key, runtime.LockOptions{})
			h, err := holder.Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 3)
			queue := "redisson_lock_queue:{" + key + "}"
			for i, c := range []*runtime.Client{c2, c3, c2} {
				go func() {
					m := c.FairLock(key, runtime.LockOptions{})
					w, err := m.TryLock(ctx, 20*time.Second, runtime.Watchdog)
					if err == nil {
						time.Sleep(30 * time.Millisecond)
						err = m.Unlock(w)
					}
					done <- err
				}()
				eventually(t, 5*time.Second, "the waiter queued", func() bool { return admin.LLen(ctx, queue).Val() == int64(i+1) })
			}
			time.Sleep(200 * time.Millisecond) // every waiter asleep, its key watched
			if err := admin.Del(ctx, evicted+":{"+key+"}").Err(); err != nil {
				t.Fatal(err)
			}
			if err := holder.Unlock(h); err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				select {
				case err := <-done:
					if err != nil {
						t.Fatalf("waiter: %v", err)
					}
				case <-time.After(5 * time.Second):
					t.Fatalf("waiter %d still asleep 5 s after the release; lock %v, queue %v", i,
						admin.HGetAll(ctx, key).Val(), admin.LRange(ctx, queue, 0, -1).Val())
				}
			}
		})
	}
}
