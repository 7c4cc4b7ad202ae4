package runtime_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockgen/lockgen/runtime"
)

func TestReadersShareAndWritersExclude(t *testing.T) {
	_, _, c := setup(t, nil)
	ctx := ctxT(t)
	rw := c.ReadWrite("catalog", runtime.LockOptions{WaitTime: runtime.Forever})
	var (
		readers, maxReaders atomic.Int64
		writers             atomic.Int64
		mu                  sync.Mutex
		reads, writes       [][2]int64
	)
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 20; j++ {
				err := rw.Read().Do(ctx, func(context.Context) error {
					start := time.Now()
					n := readers.Add(1)
					for {
						m := maxReaders.Load()
						if n <= m || maxReaders.CompareAndSwap(m, n) {
							break
						}
					}
					if writers.Load() != 0 {
						t.Error("a reader overlapped a writer")
					}
					time.Sleep(time.Millisecond)
					readers.Add(-1)
					mu.Lock()
					reads = append(reads, [2]int64{start.UnixNano(), time.Now().UnixNano()})
					mu.Unlock()
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 10; j++ {
				err := rw.Write().Do(ctx, func(context.Context) error {
					start := time.Now()
					if writers.Add(1) != 1 || readers.Load() != 0 {
						t.Error("a writer overlapped another holder")
					}
					time.Sleep(time.Millisecond)
					writers.Add(-1)
					mu.Lock()
					writes = append(writes, [2]int64{start.UnixNano(), time.Now().UnixNano()})
					mu.Unlock()
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if m := maxReaders.Load(); m < 2 {
		t.Fatalf("at most %d simultaneous readers, want readers to share", m)
	}
	t.Logf("up to %d simultaneous readers", maxReaders.Load())
	if n := countOverlaps(writes); n != 0 {
		t.Fatalf("%d overlapping writes", n)
	}
	for _, w := range writes {
		for _, r := range reads {
			if r[0] < w[1] && w[0] < r[1] {
				t.Fatalf("read %v overlaps write %v", r, w)
			}
		}
	}
}

func TestWriterMayDowngradeButReaderMayNotUpgrade(t *testing.T) {
	_, rdb, c := setup(t, nil)
	ctx := ctxT(t)
	rw := c.ReadWrite("doc", runtime.LockOptions{})
	w, err := rw.Write().Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r, err := rw.Read().TryLock(w, 0, runtime.Watchdog)
	if err != nil {
		t.Fatalf("downgrade (read while writing): %v", err)
	}
	if err := rw.Write().Unlock(w); err != nil {
		t.Fatal(err)
	}
	if mode := rdb.HGet(ctx, "doc", "mode").Val(); mode != "read" {
		t.Fatalf("mode %q after the writer left with a read hold, want read", mode)
	}
	// Another reader may now join; a writer may not.
	other, err := rw.Read().TryLock(ctx, 0, runtime.Watchdog)
	if err != nil {
		t.Fatalf("second reader after downgrade: %v", err)
	}
	if _, err := rw.Write().TryLock(ctx, 0, runtime.Watchdog); !errors.Is(err, runtime.ErrNotAcquired) {
		t.Fatalf("writer while read-held: %v", err)
	}
	// Upgrade: refused at once rather than waiting on itself.
	start := time.Now()
	_, err = rw.Write().TryLock(r, 5*time.Second, runtime.Watchdog)
	if !errors.Is(err, runtime.ErrUpgrade) || time.Since(start) > time.Second {
		t.Fatalf("upgrade: %v after %v, want ErrUpgrade at once", err, time.Since(start))
	}
	_ = rw.Read().Unlock(other)
	_ = rw.Read().Unlock(r)

	// The script refuses an upgrade too, when the ctx given shares the
	// owner but not the read acquisition (a sibling ctx).
	outer, _ := c.Mutex("outer", runtime.LockOptions{}).Lock(ctx)
	r2, err := rw.Read().Lock(outer)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rw.Write().TryLock(outer, 5*time.Second, runtime.Watchdog); !errors.Is(err, runtime.ErrUpgrade) {
		t.Fatalf("upgrade through a sibling ctx: %v, want ErrUpgrade", err)
	}
	_ = rw.Read().Unlock(r2)
	_ = c.Mutex("outer", runtime.LockOptions{}).Unlock(outer)
	if left := keysLeft(t, rdb); len(left) != 0 {
		t.Fatalf("keys left: %v", left)
	}
}

// The watchdog renews a read hold's lock hash and each of its timeout keys
// (renew_batch.lua's extra keys). It is judged by the keys' expiries in
// Redis, which a renewal moves on, not by a hold surviving a sleep of
// several leases: with a 1 s lease, a process stalled 700 ms under load
// lost the hold (as it must), and no renewal was at fault.
func TestReadHoldsAreRenewedByTheWatchdog(t *testing.T) {
	skipShortOutsideCI(t)
	t.Parallel() // servers of its own; its bounds are hundreds of ms or more
	// Renewals every second; a stall of up to 2 s loses nothing.
	const timeout = 3 * time.Second
	_, rdb, c := setup(t, &runtime.Options{WatchdogTimeout: timeout})
	ctx := ctxT(t)
	rw := c.ReadWrite("renewed", runtime.LockOptions{})
	r1, err := rw.Read().Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := rw.Read().Lock(r1) // a second hold: two timeout keys
	if err != nil {
		t.Fatal(err)
	}
	keys := append(rdb.Keys(ctx, "*rwlock_timeout*").Val(), "renewed")
	if len(keys) != 3 {
		t.Fatalf("timeout keys %v, want 2", keys[:len(keys)-1])
	}
	// Each key's expiry as the acquisitions set it (read after them: no
	// later than Redis has it), and as it is now.
	expiry := func(k string) time.Time { return time.Now().Add(rdb.PTTL(ctx, k).Val()) }
	first := map[string]time.Time{}
	for _, k := range keys {
		first[k] = expiry(k)
	}
	// A renewal comes a period (timeout/3) after the acquisition and moves
	// every expiry on by about as much; a lease is ample (the hold is lost
	// by then).
	eventually(t, timeout, "a renewal moving on the expiry of every key of the read holds", func() bool {
		for _, k := range keys {
			if expiry(k).Sub(first[k]) < timeout/6 {
				return false
			}
		}
		return true
	})
	if r2.Err() != nil {
		t.Fatalf("read hold lost: %v", context.Cause(r2))
	}
	for _, k := range keys {
		if ttl := rdb.PTTL(ctx, k).Val(); ttl <= 0 || ttl > timeout {
			t.Fatalf("%s PTTL %v, want (0, %v]", k, ttl, timeout)
		}
	}
	_ = rw.Read().Unlock(r2)
	_ = rw.Read().Unlock(r1)
	if left := keysLeft(t, rdb); len(left) != 0 {
		t.Fatalf("keys left: %v", left)
	}
}

// readerStream keeps 8 goroutines reading with overlapping holds of hold
// each until stop, and measures how long a writer waits meanwhile.
func writerWaitUnderReaders(t *testing.T, writersFirst bool, hold time.Duration, limit time.Duration) (time.Duration, error) {
	_, _, c := setup(t, nil)
	ctx := ctxT(t)
	opts := runtime.LockOptions{WaitTime: runtime.Forever, WritersFirst: writersFirst}
	rw := c.ReadWrite("stream", opts)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				_ = rw.Read().Do(ctx, func(context.Context) error { time.Sleep(hold); return nil })
			}
		}()
		time.Sleep(hold / 8) // staggered: the lock is never free of readers
	}
	time.Sleep(2 * hold)
	start := time.Now()
	w, err := rw.Write().TryLock(ctx, limit, runtime.Watchdog)
	waited := time.Since(start)
	if err == nil {
		_ = rw.Write().Unlock(w)
	}
	close(stop)
	wg.Wait()
	return waited, err
}

func TestWritersFirstStopsReadersStarvingAWriter(t *testing.T) {
	const hold = 100 * time.Millisecond
	waited, err := writerWaitUnderReaders(t, true, hold, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("writers first: writer waited %v under 8 readers holding %v each", waited, hold)
	// Readers in Redisson's order keep it out for good (the next test:
	// not in within 2 s). 2 x hold (93 ms measured) once failed on a
	// loaded box, whose readers' sleeps ran late.
	if waited > time.Second {
		t.Fatalf("writer waited %v, want within a second (about the readers' hold, %v)", waited, hold)
	}
}

// Without writers first (Redisson's order) new readers join a read-held
// lock whenever they come, so under a steady stream of overlapping readers
// the writer waits until the stream pauses: here, it does not get in at all.
func TestWithoutWritersFirstReadersCanStarveAWriter(t *testing.T) {
	skipShortOutsideCI(t)
	const hold = 100 * time.Millisecond
	waited, err := writerWaitUnderReaders(t, false, hold, 2*time.Second)
	t.Logf("Redisson order: writer waited %v (err %v) under 8 readers holding %v each", waited, err, hold)
	if err == nil && waited <= 2*hold {
		t.Fatalf("writer got in after %v: the stream of readers did not keep the lock read-held", waited)
	}
}

func TestReadWriteUsesRedissonLayout(t *testing.T) {
	_, rdb, c := setup(t, nil)
	ctx := ctxT(t)
	sub := rdb.Subscribe(ctx, "redisson_rwlock:{layout}")
	defer sub.Close()
	sub.Receive(ctx)
	rw := c.ReadWrite("layout", runtime.LockOptions{})
	r, _ := rw.Read().Lock(ctx)
	fields := rdb.HGetAll(ctx, "layout").Val()
	owner := ""
	for f, v := range fields {
		if f != "mode" {
			owner = f
			if v != "1" {
				t.Fatalf("read count %s, want 1", v)
			}
		}
	}
	if fields["mode"] != "read" || !strings.HasPrefix(owner, c.ID()+":") {
		t.Fatalf("hash %v, want mode=read and <uuid>:<n>=1", fields)
	}
	if n := rdb.Exists(ctx, "{layout}:"+owner+":rwlock_timeout:1").Val(); n != 1 {
		t.Fatalf("no read hold key {layout}:%s:rwlock_timeout:1 in %v", owner, rdb.Keys(ctx, "*").Val())
	}
	_ = rw.Read().Unlock(r)
	if msg, err := sub.ReceiveMessage(ctx); err != nil || msg.Payload != "0" {
		t.Fatalf("read release published %v %v, want \"0\"", msg, err)
	}
	w, _ := rw.Write().Lock(ctx)
	fields = rdb.HGetAll(ctx, "layout").Val()
	if fields["mode"] != "write" || fields[ownerOf(t, fields)+":write"] != "1" {
		t.Fatalf("hash %v, want mode=write and <owner>:write=1", fields)
	}
	_ = rw.Write().Unlock(w)
	if msg, err := sub.ReceiveMessage(ctx); err != nil || msg.Payload != "1" {
		t.Fatalf("write release published %v %v, want \"1\"", msg, err)
	}
}

func owner(fields map[string]string) string {
	for f := range fields {
		if strings.HasSuffix(f, ":write") {
			return strings.TrimSuffix(f, ":write")
		}
	}
	return ""
}

func ownerOf(t *testing.T, fields map[string]string) string {
	t.Helper()
	o := owner(fields)
	if o == "" {
		t.Fatalf("no write field in %v", fields)
	}
	return o
}

func TestFairLockUsesRedissonLayout(t *testing.T) {
	_, rdb, c := setup(t, nil)
	ctx := ctxT(t)
	m := c.FairLock("fl", runtime.LockOptions{})
	h, _ := m.Lock(ctx)
	go func() {
		w, err := c.FairLock("fl", runtime.LockOptions{}).Lock(ctx)
		if err == nil {
			_ = c.FairLock("fl", runtime.LockOptions{}).Unlock(w)
		}
	}()
	eventually(t, 5*time.Second, "waiter queued", func() bool { return rdb.LLen(ctx, "redisson_lock_queue:{fl}").Val() == 1 })
	waiter := rdb.LIndex(ctx, "redisson_lock_queue:{fl}", 0).Val()
	score := rdb.ZScore(ctx, "redisson_lock_timeout:{fl}", waiter).Val()
	now := float64(time.Now().UnixMilli())
	if score < now+4*60*1000 || score > now+5*60*1000+1000 {
		t.Fatalf("waiter deadline %v, want now + 5m", score)
	}
	if typ := rdb.Type(ctx, "fl").Val(); typ != "hash" {
		t.Fatalf("lock type %s", typ)
	}
	_ = m.Unlock(h)
	eventually(t, 5*time.Second, "clean", func() bool { return len(keysLeft(t, rdb)) == 0 })
}
