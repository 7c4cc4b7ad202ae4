package watchdog

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/runtime/internal/calls"
	"github.com/lockgen/lockgen/runtime/internal/holds"
)

// The watchdog alone, against a real server: a registry of holds whose
// keys the test writes as a lock script would (a hash field per owner,
// with the lease as TTL), and nothing of package runtime.

// lease is long enough that a loaded CI box keeps holds renewed: a hold
// is lost only after 2/3 of it without a confirmed renewal.
const lease = time.Second

var errGone = errors.New("field gone")

type taker struct{}

func (taker) GiveBackLost(*holds.Hold)       {}
func (taker) ExtraKeys(*holds.Hold) []string { return nil }

type fixture struct {
	rdb    redis.UniversalClient
	reg    *holds.Registry
	wd     *Watchdog
	closed chan struct{}

	mu      sync.Mutex
	renewed int
	warned  []string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureOn(t, redistest.Start(t).Client(t))
}

// newFixtureOn is newFixture, the watchdog and the test reaching Redis
// through rdb (a cluster client: holds are batched by slot).
func newFixtureOn(t *testing.T, rdb redis.UniversalClient) *fixture {
	t.Helper()
	f := &fixture{rdb: rdb, closed: make(chan struct{})}
	_, cluster := rdb.(*redis.ClusterClient)
	f.reg = holds.New(holds.Config{
		Watchdog: lease,
		Cluster:  cluster,
		Started:  func() { f.wd.Start() },
		Lost:     func(*holds.Hold, error) {},
		Expired:  func(*holds.Hold, string) error { return context.DeadlineExceeded },
	})
	renewal, closeRenewal, bounded := DeadlineClient(rdb, Workers+1)
	if !bounded || renewal == redis.UniversalClient(rdb) {
		t.Fatal("DeadlineClient did not build a client of its own for a client with default options")
	}
	life, end := context.WithCancel(context.Background())
	f.wd = New(Config{
		Registry: f.reg, Caller: rdb, Renewal: renewal,
		Life: life, Closed: f.closed, Slots: calls.NewSlotMaps(f.closed, rdb, renewal),
		Label: Label{Key: "lockgen_owner:test", Fields: []any{"pid", "1"}},
		Warn: func(msg string, _ ...any) {
			f.mu.Lock()
			f.warned = append(f.warned, msg)
			f.mu.Unlock()
		},
		Gone: func(*holds.Hold) error { return errGone },
		Renewed: func(renewed, _ int, _ time.Duration, _ error) {
			f.mu.Lock()
			f.renewed += renewed
			f.mu.Unlock()
		},
	})
	t.Cleanup(func() {
		f.reg.Close(func(*holds.Hold) error { return context.Canceled })
		close(f.closed)
		end()
		f.wd.Wait()
		_ = closeRenewal()
		f.wd.WaitJobs()
	})
	return f
}

// hold writes key as a lock of owner with the lease, and records the
// watchdog hold of it.
func (f *fixture) hold(t *testing.T, key, owner string) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sent := time.Now()
	if err := f.rdb.HSet(ctx, key, owner, 1).Err(); err != nil {
		t.Fatal(err)
	}
	f.rdb.PExpire(ctx, key, lease)
	return f.reg.Add(context.Background(), holds.Spec{Name: key, Key: key, Kind: "reentrant", From: taker{}}, holds.NewArgs(key, owner, owner), 0, sent)
}

func TestHoldsOutliveManyLeasesWhileTheirFieldsStay(t *testing.T) {
	f := newFixture(t)
	a := f.hold(t, "{a}", "o1")
	b := f.hold(t, "{b}", "o2")
	time.Sleep(5 * lease / 2)
	for _, h := range []context.Context{a, b} {
		if h.Err() != nil {
			t.Fatalf("a hold ended after %v of renewals: %v", 5*lease/2, context.Cause(h))
		}
	}
	for _, key := range []string{"{a}", "{b}"} {
		if ttl := f.rdb.PTTL(context.Background(), key).Val(); ttl <= 0 || ttl > lease {
			t.Errorf("%s: PTTL %v, want in (0, %v]", key, ttl, lease)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.renewed < 2*4 { // a renewal every third of a lease, for 2.5 leases
		t.Errorf("%d renewals confirmed in %v, want at least 8", f.renewed, 5*lease/2)
	}
}

func TestAHoldWhoseFieldWentIsLostAtItsNextRenewal(t *testing.T) {
	f := newFixture(t)
	kept := f.hold(t, "{kept}", "o1")
	gone := f.hold(t, "{gone}", "o2")
	// Another owner took the key: the field that proved the hold is gone.
	f.rdb.Del(context.Background(), "{gone}")
	f.rdb.HSet(context.Background(), "{gone}", "someone-else", 1)
	select {
	case <-gone.Done():
	case <-time.After(lease):
		t.Fatal("the hold whose field went was not lost within a lease")
	}
	if cause := context.Cause(gone); !errors.Is(cause, errGone) {
		t.Errorf("lost with %v, want the Gone cause", cause)
	}
	if ttl := f.rdb.PTTL(context.Background(), "{gone}").Val(); ttl != -1 {
		t.Errorf("the other owner's key got PTTL %v from a renewal, want none (-1)", ttl)
	}
	if kept.Err() != nil {
		t.Fatalf("the other hold ended: %v", context.Cause(kept))
	}
}

func TestTheOwnerLabelIsWrittenWithTheLease(t *testing.T) {
	f := newFixture(t)
	f.hold(t, "{a}", "o1") // the first hold starts the loop
	var ttl time.Duration
	for deadline := time.Now().Add(lease); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if ttl = f.rdb.PTTL(context.Background(), "lockgen_owner:test").Val(); ttl > 0 {
			break
		}
	}
	if ttl <= 0 || ttl > lease {
		t.Fatalf("label PTTL %v, want in (0, %v]", ttl, lease)
	}
	if pid := f.rdb.HGet(context.Background(), "lockgen_owner:test", "pid").Val(); pid != "1" {
		t.Errorf("label pid %q, want the configured fields", pid)
	}
}

func TestAStalledCallClosesTheGateUntilItReturns(t *testing.T) {
	f := newFixture(t)
	f.hold(t, "{a}", "o1")
	release := f.wd.Stall()
	waitFor(t, "the gate to close", func() bool { return f.wd.GateClosed() })
	release()
	waitFor(t, "the gate to open", func() bool { return !f.wd.GateClosed() })
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.warned) == 0 {
		t.Error("no warning while renewals ran behind")
	}
}

func TestDeadlineClientKeepsAClientThatHonoursDeadlines(t *testing.T) {
	own := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	defer own.Close()
	got, closeFn, bounded := DeadlineClient(own, 2)
	if got != redis.UniversalClient(own) || closeFn != nil || !bounded {
		t.Fatalf("DeadlineClient(ContextTimeoutEnabled) = %v, %v, %v; want the client itself, no close, bounded", got, closeFn != nil, bounded)
	}
}

func TestCheckUnboundedRefusesTimeoutsLongerThanTheRenewalWindow(t *testing.T) {
	slow := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: 5 * time.Second, ReadTimeout: 3 * time.Second})
	defer slow.Close()
	if err := CheckUnbounded(slow, 30*time.Second); err != nil {
		t.Errorf("30s watchdog, 8s of timeouts: %v", err)
	}
	err := CheckUnbounded(slow, 6*time.Second)
	if err == nil {
		t.Fatal("6s watchdog, 8s of timeouts: accepted")
	}
	if want := minWatchdog(8 * time.Second); want*2/3 < 8*time.Second {
		t.Errorf("minWatchdog(8s) = %v: its window is shorter than 8s", want)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}
