package inspect_test

// Adversarial tests (branch bi). Each fails on the product as it is.

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen"
	"github.com/lockgen/lockgen/inspect"
	"github.com/lockgen/lockgen/internal/faultproxy"
	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/runtime"
)

func zzSpec(t *testing.T, src string) *lockgen.Spec {
	t.Helper()
	s, err := lockgen.Parse("locks.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// BUG: a lock whose key pattern starts and ends with a string param
// (${name}, or ${tenant}:${id}) lists the runtime's own owner-label hashes
// (lockgen_owner:<uuid>, no braces, type hash) as held instances, with the
// label's fields (host, pid, name, since) as four "redisson" holders.
// SCAN MATCH "*" TYPE hash + the exact match `^([^{}]*)$` accept them.
func TestZZInspectListsOwnerLabelsAsInstancesOfACatchAllPattern(t *testing.T) {
	s := redistest.Start(t)
	rdb := s.Client(t)
	ctx := context.Background()
	in := &inspect.Inspector{Spec: zzSpec(t, "version: 1\npackage: locks\nlocks:\n  JobLock:\n    key: \"${job}\"\n    params: {job: string}\n"), Redis: rdb}
	c := lockClient(t, rdb, runtime.Options{Name: "worker"})
	hold(t, ctx, c.Mutex("nightly-report", runtime.LockOptions{Name: "JobLock"}))
	labelled(t, rdb, c)
	list, _, err := in.Instances(ctx, "JobLock")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, st := range list {
		keys = append(keys, st.Key)
		if strings.HasPrefix(st.Key, "lockgen_owner:") {
			t.Errorf("owner label %s listed as a held JobLock with holders %+v", st.Key, st.Holders)
		}
	}
	if len(list) != 1 {
		t.Errorf("want 1 live JobLock (nightly-report), got %d: %v", len(list), keys)
	}
}

// BUG: one wrong-typed auxiliary key of one lock (here a fair lock's
// lockgen_fair_waiters as a string) makes the whole summary fail, though
// the package takes care that an unreadable fencing token "must not hide
// the lock's state, nor fail a summary of every lock" (read.go fenced).
// The same holds for lockgen_lock_queue/grants, lockgen_rwlock_writers,
// redisson_lock_queue/timeout and {key}:timeout of a semaphore.
func TestZZOneWrongTypedAuxKeyFailsTheWholeSummary(t *testing.T) {
	s := redistest.Start(t)
	rdb := s.Client(t)
	ctx := context.Background()
	in := &inspect.Inspector{Spec: spec(t), Redis: rdb}
	c := lockClient(t, rdb, runtime.Options{})
	hold(t, ctx, c.Mutex("order:1", runtime.LockOptions{Name: "OrderLock"}))
	// Another lock's auxiliary key of the wrong type.
	rdb.HSet(ctx, "inventory:sku-1", c.ID()+":9", 1)
	rdb.RPush(ctx, "redisson_lock_queue:{inventory:sku-1}", "w:1")
	rdb.Set(ctx, "lockgen_fair_waiters:{inventory:sku-1}", "junk", 0)
	sum, err := in.Summary(ctx)
	if err != nil {
		t.Fatalf("summary failed over one stray key of InventoryLock; OrderLock's live hold is hidden: %v", err)
	}
	_ = sum
}

// Finding (slow Redis): each command is bounded by go-redis's ReadTimeout,
// but a view is not: inspect reads instance after instance, two to four
// round trips each, sequentially, with no overall deadline and no flag to
// set one. With 100 live instances and a 100 ms round trip (each command
// far below the 3 s ReadTimeout), the summary takes tens of seconds.
func TestZZInspectSummaryTimeGrowsWithInstancesTimesRTT(t *testing.T) {
	s := redistest.Start(t)
	rdb := s.Client(t)
	ctx := context.Background()
	for i := 0; i < 100; i++ {
		rdb.HSet(ctx, "order:"+strconv.Itoa(i), "deadbeef-0000-0000-0000-000000000000:1", 1)
	}
	p := faultproxy.Start(t, s.Addr())
	p.Latency(faultproxy.Both, 50*time.Millisecond)
	slow := redis.NewClient(&redis.Options{Addr: p.Addr()})
	defer slow.Close()
	in := &inspect.Inspector{Spec: spec(t), Redis: slow}
	start := time.Now()
	if _, err := in.Summary(ctx); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("summary took %v over a 100 ms round trip (100 live instances of one lock): no overall bound, reads not pipelined across instances", d)
	}
}
