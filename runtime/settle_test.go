package runtime_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/faultproxy"
	"github.com/lockgen/lockgen/internal/redistest"
	"github.com/lockgen/lockgen/runtime"
)

// An acquire whose reply is lost (the server freezes past the client's read
// timeout) is settled: either the caller holds the lock with a hold count
// of exactly 1 in Redis (resends by go-redis never count twice), or it does
// not and nothing of the attempt remains once the server is back.
func TestAcquireWithLostReplyIsSettled(t *testing.T) {
	for _, tc := range []struct {
		name    string
		retries int
	}{{"no resends", -1}, {"go-redis resends", 3}} {
		t.Run(tc.name, func(t *testing.T) {
			s := redistest.Start(t)
			rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), ReadTimeout: 100 * time.Millisecond, MaxRetries: tc.retries})
			t.Cleanup(func() { _ = rdb.Close() })
			c := newClient(t, rdb, &runtime.Options{ReleaseTimeout: 5 * time.Second})
			ctx := context.Background()
			m := c.Mutex("settle", runtime.LockOptions{})
			if err := m.Do(ctx, func(context.Context) error { return nil }); err != nil {
				t.Fatal(err) // warm: scripts loaded, connection open
			}
			paused := make(chan struct{})
			go func() {
				close(paused)
				s.Pause(500 * time.Millisecond)
			}()
			<-paused
			time.Sleep(20 * time.Millisecond)
			h, err := m.TryLock(ctx, 0, runtime.Watchdog)
			check := s.Client(t)
			if err == nil {
				n, _ := check.HGet(ctx, "settle", ownerField(t, check)).Int()
				if n != 1 {
					t.Fatalf("settled as held with hold count %d in redis, want 1", n)
				}
				if err := m.Unlock(h); err != nil {
					t.Fatal(err)
				}
				t.Log("settled as acquired")
			} else {
				t.Logf("settled as not acquired: %v", err)
			}
			time.Sleep(200 * time.Millisecond)
			if n, _ := check.Exists(ctx, "settle").Result(); n != 0 {
				t.Fatalf("lock key left behind: %v", check.HGetAll(ctx, "settle").Val())
			}
		})
	}
}

func ownerField(t *testing.T, rdb redis.UniversalClient) string {
	t.Helper()
	fields, err := rdb.HKeys(context.Background(), "settle").Result()
	if err != nil || len(fields) != 1 {
		t.Fatalf("fields %v %v", fields, err)
	}
	return fields[0]
}

// A fresh owner's acquire whose reply and settlement are both lost (the
// replies are blackholed past ReleaseTimeout) fails with ErrOutcomeUnknown;
// the lock its request took in Redis is given back in the background as
// soon as Redis answers again, not held until its lease runs out.
func TestLockTakenByALostRequestIsGivenBackOnceRedisAnswers(t *testing.T) {
	s := redistest.Start(t)
	p := faultproxy.Start(t, s.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), ReadTimeout: 100 * time.Millisecond, MaxRetries: -1, Protocol: 2})
	t.Cleanup(func() { _ = rdb.Close() })
	c := newClient(t, rdb, &runtime.Options{ReleaseTimeout: 300 * time.Millisecond})
	ctx := context.Background()
	loseAnAcquire(t, c.Mutex("settle:later", runtime.LockOptions{}), p)
	check := s.Client(t)
	if n := check.Exists(ctx, "settle:later").Val(); n != 1 {
		t.Fatal("the lost request did not take the lock: the test reproduces nothing")
	}
	p.Heal()
	healed := time.Now()
	eventually(t, 5*time.Second, "the lock taken by the lost request given back", func() bool {
		return check.Exists(ctx, "settle:later").Val() == 0
	})
	t.Logf("given back %v after Redis answered again (its lease: 30 s)", time.Since(healed).Round(time.Millisecond))
	other := newClient(t, s.Client(t), nil)
	h, err := other.Mutex("settle:later", runtime.LockOptions{}).TryLock(ctx, 0, runtime.Watchdog)
	if err != nil {
		t.Fatalf("another owner cannot take the lock: %v", err)
	}
	_ = other.Mutex("settle:later", runtime.LockOptions{}).Unlock(h)
}
