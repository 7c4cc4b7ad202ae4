package runtime_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockgen/lockgen/runtime"
)

// crashedJavaReader makes key look read-locked by a Redisson reader whose
// process died: its field and its timeout key (lease left: ttl), and the
// hash's TTL as the last renewal set it (30s).
func crashedJavaReader(t *testing.T, e *env, key string, ttl time.Duration) {
	t.Helper()
	ctx := ctxT(t)
	const java = "2f4c9a51-7c1e-4d7b-9a3e-5b0f6e1d2c3a:1"
	e.rdb.HSet(ctx, key, "mode", "read", java, 1)
	e.rdb.Set(ctx, "{"+key+"}:"+java+":rwlock_timeout:1", 1, ttl)
	e.rdb.PExpire(ctx, key, 30*time.Second)
}

// A crashed reader's field keeps the lock only as long as its own timeout
// key lives: after a live reader's release the hash's TTL is the longest
// left among the readers' timeout keys, so a writer gets the lock soon
// after the dead reader's lease ran out, not after the hash's 30s or the
// live reader's lease.
func TestWriterIsNotHeldOffByACrashedReadersField(t *testing.T) {
	for _, waiting := range []bool{false, true} {
		name := "writer comes after the release"
		if waiting {
			name = "writer waits during the release"
		}
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, &runtime.Options{WatchdogTimeout: 3 * time.Second})
			ctx := ctxT(t)
			crashedJavaReader(t, e, "shelf", 300*time.Millisecond)
			rw := e.c.ReadWrite("shelf", runtime.LockOptions{})
			r, err := rw.Read().TryLock(ctx, 0, runtime.Watchdog)
			if err != nil {
				t.Fatal(err)
			}
			type result struct {
				hctx context.Context
				err  error
				took time.Duration
			}
			got := make(chan result, 1)
			start := time.Now()
			write := func() {
				w, err := rw.Write().TryLock(ctx, 2*time.Second, runtime.Watchdog)
				got <- result{w, err, time.Since(start)}
			}
			if waiting {
				go write()
				time.Sleep(50 * time.Millisecond) // the writer sleeps on the hash's 30s
				if err := rw.Read().Unlock(r); err != nil {
					t.Fatal(err)
				}
			} else {
				if err := rw.Read().Unlock(r); err != nil {
					t.Fatal(err)
				}
				go write()
			}
			res := <-got
			if res.err != nil {
				t.Fatalf("writer: %v after %v, want the lock once the crashed reader's 300ms lease ran out", res.err, res.took)
			}
			if res.took > 1500*time.Millisecond {
				t.Fatalf("writer waited %v, want it shortly after the crashed reader's 300ms", res.took)
			}
			if err := rw.Write().Unlock(res.hctx); err != nil {
				t.Fatal(err)
			}
			if left := keysLeft(t, e.rdb); len(left) != 0 {
				t.Fatalf("keys left: %v", left)
			}
		})
	}
}

// A writer that took a read hold (downgrade) may write again through the
// read hold's ctx: it still holds the write side, so it is a re-entry, not
// an upgrade. A pure reader asking to write still gets ErrUpgrade.
func TestWriteAgainThroughADowngradedReadHold(t *testing.T) {
	e := newEnv(t, nil)
	ctx := ctxT(t)
	rw := e.c.ReadWrite("ledger", runtime.LockOptions{})
	w, err := rw.Write().TryLock(ctx, 0, runtime.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	r, err := rw.Read().TryLock(w, 0, runtime.Watchdog)
	if err != nil {
		t.Fatalf("downgrade: %v", err)
	}
	w2, err := rw.Write().TryLock(r, 0, runtime.Watchdog)
	if err != nil {
		t.Fatalf("write again through the read hold's ctx: %v, want a re-entry of the write side", err)
	}
	// counts checks the owner's hold counts, asking through hctx (a live
	// ctx of the owner: a released hold's ctx is done).
	counts := func(hctx context.Context, wantWrite, wantRead int) {
		t.Helper()
		if n, err := rw.Write().HoldCount(hctx); n != wantWrite || err != nil {
			t.Fatalf("write hold count %d %v, want %d", n, err, wantWrite)
		}
		if n, err := rw.Read().HoldCount(hctx); n != wantRead || err != nil {
			t.Fatalf("read hold count %d %v, want %d", n, err, wantRead)
		}
	}
	counts(w2, 2, 1)
	if err := rw.Write().Unlock(w2); err != nil {
		t.Fatal(err)
	}
	counts(r, 1, 1)
	if err := rw.Read().Unlock(r); err != nil {
		t.Fatal(err)
	}
	counts(w, 1, 0)
	if mode := e.rdb.HGet(ctx, "ledger", "mode").Val(); mode != "write" {
		t.Fatalf("mode %q while the write hold is left, want write", mode)
	}
	if err := rw.Write().Unlock(w); err != nil {
		t.Fatal(err)
	}
	if left := keysLeft(t, e.rdb); len(left) != 0 {
		t.Fatalf("keys left: %v", left)
	}

	// A pure reader asking to write is an upgrade: refused at once.
	r2, err := rw.Read().TryLock(ctx, 0, runtime.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := rw.Write().TryLock(r2, 5*time.Second, runtime.Watchdog); !errors.Is(err, runtime.ErrUpgrade) || time.Since(start) > time.Second {
		t.Fatalf("upgrade: %v after %v, want ErrUpgrade at once", err, time.Since(start))
	}
	if err := rw.Read().Unlock(r2); err != nil {
		t.Fatal(err)
	}
	if left := keysLeft(t, e.rdb); len(left) != 0 {
		t.Fatalf("keys left: %v", left)
	}
}
