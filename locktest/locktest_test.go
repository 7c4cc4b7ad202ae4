package locktest_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/lockgen/lockgen/example/gen"
	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/locktest"
	"github.com/lockgen/lockgen/runtime"
)

func TestEveryKindWorksOnTheInProcessRedis(t *testing.T) {
	t.Setenv(locktest.EnvVar, "")
	checkEveryKind(t, locktest.NewServer(t))
}

func TestEveryKindWorksOnTheRedisTheEnvironmentNames(t *testing.T) {
	s := redistest.Start(t)
	t.Setenv(locktest.EnvVar, "redis://"+s.Addr()+"/0")
	srv := locktest.NewServer(t)
	if !strings.Contains(srv.String(), s.Addr()) {
		t.Fatalf("the Server is %s, not the redis-server at %s", srv, s.Addr())
	}
	checkEveryKind(t, srv)
	// The locks were taken on that server, not on an in-process one.
	keys, err := s.Client(t).Keys(context.Background(), "redisson_lock_token:*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("no fencing token counter on the redis-server (%v, %v)", keys, err)
	}
}

// checkEveryKind takes every kind of lock of example/locks.yaml through one
// Client of srv and tries it from another (another process), and checks
// that a fixed lease runs out on time.
func checkEveryKind(t *testing.T, srv *locktest.Server) {
	a, b := gen.New(srv.Client(nil)), gen.New(srv.Client(nil))
	bg := context.Background()
	notAcquired := func(what string, _ context.Context, err error) {
		t.Helper()
		if !errors.Is(err, runtime.ErrNotAcquired) {
			t.Errorf("%s while held by another Client: %v, want ErrNotAcquired", what, err)
		}
	}
	holds := []struct {
		name string
		hold func(ctx context.Context, fn func(ctx context.Context) error) error
		try  func() // by b, while a holds
	}{
		{"reentrant", func(ctx context.Context, fn func(context.Context) error) error {
			return a.WithOrderLock(ctx, 1, fn)
		}, func() {
			ctx, err := b.OrderLock(1).TryLock(bg, 0, runtime.Watchdog)
			notAcquired("OrderLock", ctx, err)
		}},
		{"fair", func(ctx context.Context, fn func(context.Context) error) error {
			return a.WithInventoryLock(ctx, 1, "sku-1", fn)
		}, func() {
			ctx, err := b.InventoryLock(1, "sku-1").TryLock(bg, 0, runtime.Watchdog)
			notAcquired("InventoryLock", ctx, err)
		}},
		{"readwrite, write side", func(ctx context.Context, fn func(context.Context) error) error {
			return a.WithCatalogWrite(ctx, "shop-1", fn)
		}, func() {
			ctx, err := b.Catalog("shop-1").Read().TryLock(bg, 0, runtime.Watchdog)
			notAcquired("Catalog read", ctx, err)
		}},
		{"readwrite, read side", func(ctx context.Context, fn func(context.Context) error) error {
			return a.WithCatalogRead(ctx, "shop-2", fn)
		}, func() {
			ctx, err := b.Catalog("shop-2").Write().TryLock(bg, 0, runtime.Watchdog)
			notAcquired("Catalog write", ctx, err)
			if err := b.WithCatalogRead(bg, "shop-2", func(context.Context) error { return nil }); err != nil {
				t.Errorf("a second reader: %v", err)
			}
		}},
		{"multi", func(ctx context.Context, fn func(context.Context) error) error {
			return a.WithCheckoutLock(ctx, 2, 1, "sku-2", fn)
		}, func() {
			ctx, err := b.InventoryLock(1, "sku-2").TryLock(bg, 0, runtime.Watchdog)
			notAcquired("a member of CheckoutLock", ctx, err)
		}},
		{"red", func(ctx context.Context, fn func(context.Context) error) error {
			return a.WithPaymentLock(ctx, "pay-1", fn)
		}, func() {
			ctx, err := b.PaymentLock("pay-1").TryLock(bg, 0, 10*time.Second)
			notAcquired("PaymentLock", ctx, err)
		}},
		{"reentrant in a slot", func(ctx context.Context, fn func(context.Context) error) error {
			return a.WithTenantReportLock(ctx, "acme", 5, fn)
		}, func() {
			ctx, err := b.TenantReportLock("acme", 5).TryLock(bg, 0, runtime.Watchdog)
			notAcquired("TenantReportLock", ctx, err)
		}},
		{"fenced", func(ctx context.Context, fn func(context.Context) error) error {
			return a.WithLedgerLock(ctx, 1, func(ctx context.Context, fence int64) error {
				if fence < 1 {
					t.Errorf("fencing token %d", fence)
				}
				return fn(ctx)
			})
		}, func() {
			ctx, err := b.LedgerLock(1).TryLock(bg, 0, runtime.Watchdog)
			notAcquired("LedgerLock", ctx, err)
		}},
		{"semaphore", func(ctx context.Context, fn func(context.Context) error) error {
			return a.WithPaymentSlots(ctx, "shop-1", fn)
		}, func() {
			slots := b.PaymentSlots("shop-1")
			two, err := slots.TryAcquire(bg, 2, 0) // the 2 permits left of 3
			if err != nil {
				t.Errorf("PaymentSlots, 2 of the 3 permits: %v", err)
				return
			}
			defer slots.Release(two)
			ctx, err := slots.TryAcquire(bg, 1, 0)
			notAcquired("a 4th PaymentSlots permit", ctx, err)
		}},
	}
	for _, h := range holds {
		ran := false
		err := h.hold(bg, func(ctx context.Context) error {
			ran = true
			h.try()
			return nil
		})
		if err != nil || !ran {
			t.Errorf("%s: %v (fn ran: %v)", h.name, err, ran)
		}
	}

	// The latch: armed by one process, counted down by the other.
	if armed, err := a.ArmImportDone(bg, "batch-1"); !armed || err != nil {
		t.Fatalf("ArmImportDone: %v, %v", armed, err)
	}
	for range 3 {
		if err := b.CountDownImportDone(bg, "batch-1"); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.AwaitImportDone(bg, "batch-1"); err != nil {
		t.Errorf("AwaitImportDone after 3 count-downs: %v", err)
	}

	// A fixed lease runs out in Redis as on the holder's clock: the holder
	// is told, and the other process gets the lock.
	held, err := a.OrderLock(3).TryLock(bg, 0, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	hctx, err := b.OrderLock(3).TryLock(bg, 5*time.Second, runtime.Watchdog)
	if err != nil {
		t.Fatalf("the lease of 200ms never ran out: %v", err)
	}
	defer b.OrderLock(3).Unlock(hctx)
	if waited := time.Since(start); waited > 2*time.Second {
		t.Errorf("took the lock %v after a lease of 200ms", waited)
	}
	if !errors.Is(context.Cause(held), runtime.ErrLockLost) {
		t.Errorf("the first holder's ctx: %v, want ErrLockLost", context.Cause(held))
	}
}

func TestALostLockIsWarnedInTheTestLog(t *testing.T) {
	t.Setenv(locktest.EnvVar, "")
	ft := newT()
	defer ft.end()
	srv := locktest.NewServer(ft)
	c := srv.Client(&runtime.Options{WatchdogTimeout: 300 * time.Millisecond})
	m := c.Mutex("order:1", runtime.LockOptions{Name: "OrderLock"})
	held, err := m.Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	srv.Redis().Del(context.Background(), m.Key()) // as a FLUSHALL would
	select {
	case <-held.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the hold's ctx was not cancelled after its key was deleted")
	}
	for deadline := time.Now().Add(time.Second); !strings.Contains(ft.log(), "lock lost") && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if log := ft.log(); !strings.Contains(log, "level=WARN") || !strings.Contains(log, "lock lost") || !strings.Contains(log, "key=order:1") {
		t.Fatalf("test log: %q, want the lost lock warned", log)
	}
}

func TestTheClientAndItsRedisAreClosedWhenTheTestEnds(t *testing.T) {
	t.Setenv(locktest.EnvVar, "")
	ft := newT()
	srv := locktest.NewServer(ft)
	c := srv.Client(nil)
	ft.end()
	_, err := c.Mutex("order:1", runtime.LockOptions{}).TryLock(context.Background(), 0, runtime.Watchdog)
	if !errors.Is(err, runtime.ErrClosed) {
		t.Errorf("a lock after the test ended: %v, want ErrClosed", err)
	}
	if err := srv.Redis().Ping(context.Background()).Err(); err == nil {
		t.Error("the Server's Redis client still answers after the test ended")
	}
}

func TestAnUnreachableRedisFailsTheTestWithoutItsPassword(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	for url, want := range map[string]string{
		"redis://user:s3cret@" + addr + "/0": "does not answer",
		"http://" + addr:                     "invalid URL scheme",
	} {
		t.Setenv(locktest.EnvVar, url)
		msg := fatalOf(func(tb locktest.TB) { locktest.Client(tb, nil) })
		if !strings.Contains(msg, want) || !strings.Contains(msg, locktest.EnvVar) || strings.Contains(msg, "s3cret") {
			t.Errorf("%s: the test failed with %q, want %q, the name of %s and no password", url, msg, want, locktest.EnvVar)
		}
	}
}

// fatalOf runs f with a fakeT and returns what f failed the test with.
func fatalOf(f func(locktest.TB)) (msg string) {
	ft := newT()
	defer ft.end()
	defer func() {
		if r, ok := recover().(fatal); ok {
			msg = string(r)
		}
	}()
	f(ft)
	return ""
}
